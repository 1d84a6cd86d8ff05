package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// serve --embedded starts its own server and connects to it: a connection
// flag given with it would be ignored without a word, so it is refused
// before anything starts.
func TestServeEmbeddedRefusesConnectionFlagsItWouldIgnore(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string // words the error names
	}{
		{"a server URL is refused", []string{"--server", "nats://127.0.0.1:1"}, []string{"--embedded", "--server"}},
		{"a server URL is refused along with credentials", []string{"--creds", "x.creds", "--server", "nats://127.0.0.1:1"}, []string{"--embedded", "--server"}},
		{"a user and password are refused", []string{"--user", "someone", "--password", "secret"}, []string{"--embedded", "--user", "--password"}},
		{"a credentials file is refused", []string{"--creds", "x.creds"}, []string{"--embedded", "--creds"}},
		{"an nkey is refused", []string{"--nkey", "x.nk"}, []string{"--embedded", "--nkey"}},
		{"TLS files are refused", []string{"--tls-ca", "ca.pem", "--tlscert", "c.pem"}, []string{"--embedded", "--tls-ca", "--tlscert"}},
		{"TLS first is refused", []string{"--tls-first"}, []string{"--embedded", "--tls-first"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--embedded", "--insecure-allow-unsigned", "--data", data, "--listen", "127.0.0.1:0"}, c.args...)
			var errOut bytes.Buffer
			// Were it not refused, it would serve until this runs out.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := run(ctx, args, io.Discard, &errOut)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 {
				t.Fatalf("%v: %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(errOut.String(), "secret") {
				t.Errorf("the refusal echoes the password: %v\n%s", err, errOut.String())
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused command made its data directory: %v", err)
			}
		})
	}
}

// The environment's NATS settings are for --server: with --embedded they
// neither fail the command nor point it at another server.
func TestServeEmbeddedLeavesTheEnvironmentsConnectionSettingsOut(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("NATS_USER", "someone")
	t.Setenv("NATS_PASSWORD", "secret")
	t.Setenv("NATS_CA", missing)
	p := serveEmbedded(t, "--insecure-allow-unsigned")
	waitFor(t, 30*time.Second, "the embedded executor to consume", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("serve --embedded ended: %v\n%s", err, p.log.String())
		default:
		}
		return strings.Contains(p.log.String(), "consuming")
	})
	if !strings.Contains(p.log.String(), "without the NATS credentials and TLS settings of the environment") {
		t.Errorf("the log does not say the environment's settings were left out:\n%s", p.log.String())
	}
	if strings.Contains(p.log.String(), "secret") {
		t.Errorf("the log shows the environment's password:\n%s", p.log.String())
	}
}

// The embedded task service takes provider serve's flags with the same
// names and defaults.
func TestServeEmbeddedHasTheServiceFlagsOfProviderServeWithTheirDefaults(t *testing.T) {
	fs := newServeFlags(io.Discard).fs
	for _, c := range []struct{ name, want string }{
		{"key-clock-allowance", provider.DefaultKeyClockAllowance.String()},
		{"key-margin", provider.DefaultKeyMargin.String()},
		{"records-retention", "0s"},
		{"compact-every", provider.DefaultCompactEvery.String()},
		{"metrics-max-scopes", strconv.Itoa(metrics.DefaultMaxScopeLabels)},
	} {
		t.Run("--"+c.name+" defaults to "+c.want, func(t *testing.T) {
			fl := fs.Lookup(c.name)
			if fl == nil {
				t.Fatalf("serve has no --%s", c.name)
			}
			if fl.DefValue != c.want {
				t.Errorf("--%s defaults to %s, want %s", c.name, fl.DefValue, c.want)
			}
		})
	}
}

// Values provider serve refuses are refused here too, and so are the
// service's flags without --embedded, where no service runs to take them.
func TestServeRefusesServiceFlagsItCannotUse(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string // what the error names
	}{
		{"a negative clock allowance is refused", []string{"--embedded", "--key-clock-allowance", "-1s"}, "--key-clock-allowance"},
		{"a negative margin is refused", []string{"--embedded", "--key-margin", "-1m"}, "--key-margin"},
		{"a negative records retention is refused", []string{"--embedded", "--records-retention", "-1h"}, "--records-retention"},
		{"a compaction period of zero is refused", []string{"--embedded", "--compact-every", "0s"}, "--compact-every"},
		{"no scope label at all is refused", []string{"--embedded", "--metrics-max-scopes", "0"}, "--metrics-max-scopes"},
		{"a margin without --embedded is refused", []string{"--server", "nats://127.0.0.1:1", "--key-margin", "1m"}, "--key-margin without --embedded"},
		{"a scope label bound without --embedded is refused", []string{"--metrics-max-scopes", "5"}, "--metrics-max-scopes without --embedded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--insecure-allow-unsigned", "--data", data, "--listen", "127.0.0.1:0"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := run(ctx, args, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: %v (exit %d), want a usage error naming %s", args, err, exitCode(err), c.want)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused command made its data directory: %v", err)
			}
		})
	}
}

// The flags reach the hosted service: with no allowance or margin, keys
// whose approvals expired are compacted at the next --compact-every, the
// records are removed after --records-retention, and /metrics names one
// scope and sums the others under "_other" (--metrics-max-scopes 1).
func TestServeEmbeddedPassesTheServiceFlagsToItsTaskService(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := serveEmbedded(t, "--insecure-allow-unsigned", "--http", addr, "--key-clock-allowance", "0", "--key-margin", "0",
		"--compact-every", "100ms", "--records-retention", "1s", "--metrics-max-scopes", "1")
	nc, err := nats.Connect(p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := provider.NewClient(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Valid for two more seconds: a call for a new key whose deadline has
	// passed is refused (key_deadline), so the keys are made just before.
	expired := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	for _, scope := range []string{"alpha", "beta"} {
		req, err := provider.NewScopedRequest(scope, "intent-"+scope, provider.Task{Title: "expired in " + scope})
		if err != nil {
			t.Fatal(err)
		}
		req.NotAfter = expired
		res, err := c.Create(ctx, req)
		if err != nil || res.Outcome != provider.OutcomeCreated {
			t.Fatalf("creating in %s: %+v, %v", scope, res, err)
		}
	}
	var info provider.Info
	waitFor(t, 20*time.Second, "both keys compacted and the four records retired", func() bool {
		info, err = c.Info(ctx)
		return err == nil && info.Keys.Compacted == 2 && info.Keys.RecordsRetired == 4
	})
	if info.Keys.Live != 0 || info.TasksExisting != 2 {
		t.Errorf("after compaction: %+v; want no live key and both tasks kept", info)
	}
	m := scrape(t, addr)
	for name, want := range map[string]float64{
		"sendtwice_keys_compacted":                                              2,
		"sendtwice_keys_live":                                                   0,
		`sendtwice_scope_creates_executed{scope="alpha"}`:                       1,
		`sendtwice_scope_creates_executed{scope="` + metrics.OtherScopes + `"}`: 1,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("/metrics %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if _, ok := m[`sendtwice_scope_creates_executed{scope="beta"}`]; ok {
		t.Errorf("/metrics labels scope beta past --metrics-max-scopes 1")
	}
}
