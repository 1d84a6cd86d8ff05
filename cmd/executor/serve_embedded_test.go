package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
