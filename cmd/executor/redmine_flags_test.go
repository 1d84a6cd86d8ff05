package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// redmineKey stands for a Redmine API key; no output of a command may show
// it.
const redmineKey = "REDMINE-KEY-7d31e0"

// parseRedmineTS parses args into task service flags whose environment is
// env (nil: empty).
func parseRedmineTS(t *testing.T, env map[string]string, args ...string) *taskServiceFlags {
	t.Helper()
	ts := parseTaskServiceFlags(t, args...)
	ts.getenv = func(k string) string { return env[k] }
	return ts
}

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

const redmineURL = "http://127.0.0.1:1/"

// redmineArgs are the flags of a well-formed redmine service.
var redmineArgs = []string{"--task-service", "redmine", "--redmine-url", redmineURL, "--redmine-project", "ops"}

func TestRedmineTaskServiceFlags(t *testing.T) {
	withKey := map[string]string{redmineAPIKeyEnv: redmineKey}
	wantUsage := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, errUsage) {
			t.Fatalf("check: %v, want a usage error", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("check: %q lacks %q", err, w)
			}
		}
		if strings.Contains(err.Error(), redmineKey) {
			t.Errorf("check: %q shows the API key", err)
		}
	}

	t.Run("redmine is a kind that needs NATS and the intent ledger, and its field defaults to the adapter's", func(t *testing.T) {
		ts := parseRedmineTS(t, withKey, redmineArgs...)
		if err := ts.check(); err != nil {
			t.Fatalf("check: %v", err)
		}
		if !ts.needsNATS() || !ts.needsLedger() {
			t.Errorf("needs NATS %v, needs the ledger %v; want both", ts.needsNATS(), ts.needsLedger())
		}
		if ts.RedmineField != redmine.DefaultField {
			t.Errorf("field %q, want %q", ts.RedmineField, redmine.DefaultField)
		}
	})
	for _, kind := range []string{"fake", "caldav"} {
		for _, fl := range []struct{ name, flag, value string }{
			{"a URL", "--redmine-url", redmineURL},
			{"a project", "--redmine-project", "ops"},
			{"a field", "--redmine-field", "my key"},
			{"the default field given explicitly", "--redmine-field", redmine.DefaultField},
			{"an API key file", "--redmine-api-key-file", writeTestFile(t, "key", redmineKey)},
			{"a lock TTL", "--redmine-lock-ttl", "30s"},
		} {
			t.Run("with "+kind+" "+fl.name+" ("+fl.flag+") is refused, naming the kind it needs", func(t *testing.T) {
				args := []string{"--task-service", kind, fl.flag, fl.value}
				if kind == "caldav" {
					args = append(args, "--caldav-url", "http://127.0.0.1:1/tasks/")
				}
				err := parseRedmineTS(t, withKey, args...).check()
				wantUsage(t, err, fl.flag, "need --task-service redmine")
			})
		}
	}
	t.Run("with redmine a caldav flag is refused", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--caldav-url", "http://127.0.0.1:1/tasks/")...).check()
		wantUsage(t, err, "need --task-service caldav")
	})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"redmine without --redmine-url is refused", []string{"--task-service", "redmine", "--redmine-project", "ops"}, "needs --redmine-url"},
		{"redmine without --redmine-project is refused", []string{"--task-service", "redmine", "--redmine-url", redmineURL}, "needs --redmine-project"},
		{"an empty --redmine-field is refused", append(redmineArgs, "--redmine-field", " "), "--redmine-field is empty"},
		{"a negative --redmine-lock-ttl is refused", append(redmineArgs, "--redmine-lock-ttl", "-1s"), "negative"},
		{"a URL that is not http or https is refused", []string{"--task-service", "redmine", "--redmine-url", "ftp://redmine.example.org/", "--redmine-project", "ops"}, "--redmine-url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantUsage(t, parseRedmineTS(t, withKey, c.args...).check(), c.want)
		})
	}

	t.Run("the API key comes from the file (trimmed), before the environment", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{redmineAPIKeyEnv: "from-env"},
			append(redmineArgs, "--redmine-api-key-file", writeTestFile(t, "key", redmineKey+"\r\n"))...)
		if err := ts.check(); err != nil || ts.redmineAPIKey != redmineKey {
			t.Errorf("check: %v; key from the file: %v", err, ts.redmineAPIKey == redmineKey)
		}
	})
	t.Run("without a file the API key comes from $REDMINE_API_KEY", func(t *testing.T) {
		ts := parseRedmineTS(t, withKey, redmineArgs...)
		if err := ts.check(); err != nil || ts.redmineAPIKey != redmineKey {
			t.Errorf("check: %v; key from the environment: %v", err, ts.redmineAPIKey == redmineKey)
		}
	})
	t.Run("no API key at all is refused, naming where it comes from", func(t *testing.T) {
		wantUsage(t, parseRedmineTS(t, nil, redmineArgs...).check(), "--redmine-api-key-file", "$"+redmineAPIKeyEnv)
	})
	t.Run("an empty API key file is refused and the environment is not used instead", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--redmine-api-key-file", writeTestFile(t, "empty", "\n"))...).check()
		wantUsage(t, err, "--redmine-api-key-file", "is empty")
	})
	t.Run("a missing API key file is refused", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--redmine-api-key-file", filepath.Join(t.TempDir(), "missing"))...).check()
		wantUsage(t, err, "--redmine-api-key-file")
	})

	for _, c := range []struct {
		name    string
		ttl     string
		timeout time.Duration
		want    time.Duration // 0: refused
	}{
		{"the lock TTL defaults to twice the call timeout and 10s", "", 5 * time.Second, 20 * time.Second},
		{"a lock TTL longer than the call timeout is taken", "6s", 5 * time.Second, 6 * time.Second},
		{"a lock TTL equal to the call timeout is refused", "5s", 5 * time.Second, 0},
		{"a lock TTL shorter than the call timeout is refused", "3s", 5 * time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := redmineArgs
			if c.ttl != "" {
				args = append(args, "--redmine-lock-ttl", c.ttl)
			}
			ts := parseRedmineTS(t, withKey, args...)
			if err := ts.check(); err != nil {
				t.Fatal(err)
			}
			err := ts.checkCallTimeout(c.timeout)
			if c.want == 0 {
				wantUsage(t, err, "--redmine-lock-ttl "+c.ttl, "call timeout "+c.timeout.String())
				return
			}
			if err != nil || ts.lockTTL(c.timeout) != c.want {
				t.Errorf("check: %v; TTL %s, want %s", err, ts.lockTTL(c.timeout), c.want)
			}
		})
	}
}

// The commands refuse what the flags refuse, as usage errors, and never
// show the API key: not in an error, not on stdout or stderr, not in --help.
func TestRedmineFlagsInTheCommandsShowNoKey(t *testing.T) {
	t.Setenv(redmineAPIKeyEnv, redmineKey)
	keyFile := writeTestFile(t, "key", redmineKey)
	for _, c := range []struct {
		name string
		args []string
		exit int
		says string
	}{
		{"serve refuses a lock TTL not longer than --call-timeout, naming both",
			append([]string{"serve", "--check-config", "--insecure-allow-unsigned", "--call-timeout", "10s", "--redmine-lock-ttl", "10s"}, redmineArgs...),
			2, "--redmine-lock-ttl 10s is not longer than the call timeout 10s"},
		{"serve --check-config takes the key from a file",
			append([]string{"serve", "--check-config", "--insecure-allow-unsigned", "--redmine-api-key-file", keyFile}, redmineArgs...), 0, ""},
		{"serve refuses --redmine-url with the fake service",
			[]string{"serve", "--check-config", "--insecure-allow-unsigned", "--redmine-url", redmineURL}, 2, "need --task-service redmine"},
		{"probe refuses redmine without a project",
			[]string{"probe", "--task-service", "redmine", "--redmine-url", redmineURL, "--yes"}, 2, "needs --redmine-project"},
		{"probe refuses --embedded with redmine",
			append([]string{"probe", "--embedded", "--yes"}, redmineArgs...), 2, "--embedded"},
		{"demo refuses redmine and says why",
			append([]string{"demo"}, redmineArgs...), 2, "intent ledger"},
		{"verify against a NATS server that does not answer fails without the key",
			append([]string{"verify", "--server", "nats://127.0.0.1:1", "--timeout", "2s"}, redmineArgs...), 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if exitCode(err) != c.exit {
				t.Fatalf("%v ended with %v (exit %d), want exit %d\n%s%s", c.args, err, exitCode(err), c.exit, out.String(), errOut.String())
			}
			if c.says != "" && !strings.Contains(err.Error(), c.says) {
				t.Errorf("the error %q lacks %q", err, c.says)
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if strings.Contains(msg+out.String()+errOut.String(), redmineKey) {
				t.Errorf("%v shows the API key:\n%s\n%s%s", c.args, msg, out.String(), errOut.String())
			}
		})
	}
	for _, cmd := range []string{"serve", "probe", "verify"} {
		t.Run(cmd+" --help lists the redmine flags and shows no key", func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{cmd, "--help"}, &out, &errOut)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%s --help: %v", cmd, err)
			}
			help := out.String() + errOut.String()
			for _, want := range []string{"redmine", "-redmine-url", "-redmine-project", "-redmine-field", "-redmine-api-key-file", "$" + redmineAPIKeyEnv, "-redmine-lock-ttl"} {
				if !strings.Contains(help, want) {
					t.Errorf("%s --help lacks %q", cmd, want)
				}
			}
			if strings.Contains(help, redmineKey) {
				t.Errorf("%s --help shows the API key", cmd)
			}
		})
	}
	t.Run("the usage names redmine", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "redmine (with --redmine-url") {
			t.Errorf("usage lacks redmine:\n%s", out.String())
		}
	})
}

// open builds the redmine service on the intent ledger: it provisions the
// ledger only when asked, and gives every part the probe and verify use.
func TestOpeningRedmineTakesTheIntentLedger(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() (*nats.Conn, error) { return env.NC, nil }
	t.Run("without provisioning, a missing ledger bucket is refused and none is made", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{redmineAPIKeyEnv: redmineKey}, redmineArgs...)
		if err := ts.check(); err != nil {
			t.Fatal(err)
		}
		_, err := ts.open(ctx, connect, 5*time.Second)
		if !errors.Is(err, ledger.ErrNoBucket) {
			t.Errorf("open: %v, want the missing ledger bucket", err)
		}
		if _, err := env.JS.KeyValue(ctx, ledger.Bucket); err == nil {
			t.Error("open made the ledger bucket without provisioning")
		}
	})
	t.Run("with provisioning, it makes the bucket and the service has every part", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{redmineAPIKeyEnv: redmineKey}, redmineArgs...)
		if err := ts.check(); err != nil {
			t.Fatal(err)
		}
		ts.ProvisionLedger, ts.LedgerReplicas = true, 1
		svc, err := ts.open(ctx, connect, 5*time.Second)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer svc.Close()
		if svc.Service == nil || svc.Delete == nil || svc.LoseReply == nil || svc.Count == nil || svc.Naive == nil ||
			svc.Find == nil || svc.reach == nil || svc.audit == nil || svc.ledger == nil {
			t.Errorf("the redmine target lacks a part: %+v", svc.Target)
		}
		if svc.Class != classNoKey {
			t.Errorf("class %q, want %q", svc.Class, classNoKey)
		}
		where, err := svc.keepDeletedKeys(ctx, env.JS, false, 1)
		if err != nil || !strings.Contains(where, ledger.Bucket) {
			t.Errorf("keepDeletedKeys: %q, %v; want the ledger open took", where, err)
		}
	})
}

// The adapter's HTTP client keeps at most redmine.DefaultMaxConns
// connections to Redmine open at once, however many calls run: what serve
// opens is what open builds.
func TestRedmineCallsShareABoundedNumberOfConnections(t *testing.T) {
	const calls = 2*redmine.DefaultMaxConns + 8
	var inFlight, most atomic.Int64
	over := make(chan struct{})
	var overOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if n > redmine.DefaultMaxConns {
			overOnce.Do(func() { close(over) })
		}
		// Hold the request until the bound is broken or a while has
		// passed, so that calls pile up on the connections.
		select {
		case <-over:
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts := parseRedmineTS(t, map[string]string{redmineAPIKeyEnv: redmineKey},
		"--task-service", "redmine", "--redmine-url", srv.URL+"/", "--redmine-project", "ops")
	if err := ts.check(); err != nil {
		t.Fatal(err)
	}
	ts.ProvisionLedger = true
	svc, err := ts.open(ctx, func() (*nats.Conn, error) { return env.NC, nil }, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() { _ = svc.Reach(ctx) })
	}
	wg.Wait()
	if got := most.Load(); got > redmine.DefaultMaxConns {
		t.Errorf("%d requests were at Redmine at once, want at most %d", got, redmine.DefaultMaxConns)
	} else if got < 2 {
		t.Errorf("at most %d request at once: the calls did not run together", got)
	}
}

// executor serve reads Redmine once before it consumes: a project whose
// issues have no key field (here: --redmine-field names none) stops it,
// saying how an administrator makes the field, and takes no message; a
// wrong API key stops it with Redmine's 401.
func TestServeRefusesARedmineWithoutTheKeyField(t *testing.T) {
	redminetest.Require(t)
	s := testenv.SeedFor(t, scenario.Redmine)
	srv := redminetest.Start(t, redminetest.Options{})
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The approval waits in the stream while the executors are refused.
	if _, err := testenv.Publish(ctx, env.JS, s.Original.Envelope()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, field, key string
		says             []string
	}{
		{"a field that does not exist", "no such field", srv.APIKey,
			[]string{"refuses this executor", `--redmine-field "no such field"`, "Custom fields", "For all projects", "Used as a filter"}},
		{"a wrong API key", srv.FieldName, "not-the-key-" + redmineKey, []string{"refuses this executor", "401", "the API key"}},
	} {
		t.Run("serve with "+c.name+" exits 1 saying why and takes no message", func(t *testing.T) {
			t.Setenv(redmineAPIKeyEnv, c.key)
			p := startExecutor(t, env.URL(), "exec-refused", "--task-service", "redmine", "--redmine-url", srv.URL,
				"--redmine-project", srv.Project, "--redmine-field", c.field)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve is still running:\n%s", p.out.String())
			}
			out := p.out.String()
			t.Logf("serve with %s:\n%s", c.name, out)
			if p.err == nil {
				t.Fatalf("serve exited 0:\n%s", out)
			}
			for _, want := range c.says {
				if !strings.Contains(out, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, c.key) {
				t.Errorf("the API key is in serve's output:\n%s", out)
			}
			if received, _ := srv.Posts(); received != 0 {
				t.Errorf("the refused executor sent %d POSTs", received)
			}
		})
	}
	ci, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ci.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 0 {
		t.Errorf("the refused executors took %d deliveries", info.Delivered.Consumer)
	}
}
