package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// writeFileIn writes content to the file name in dir, readable by its
// owner only, and returns its path.
func writeFileIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseTaskServiceFlags parses args into task service flags.
func parseTaskServiceFlags(t *testing.T, args ...string) *Config {
	t.Helper()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ts := FlagsVar(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestTaskServiceFlags(t *testing.T) {
	parseTS := parseTaskServiceFlags
	t.Run("the fake task service over NATS is the default", func(t *testing.T) {
		ts := parseTS(t)
		if ts.Kind != KindFake || ts.Check() != nil || !ts.NeedsNATS() {
			t.Errorf("default: kind %q, check %v, needs NATS %v", ts.Kind, ts.Check(), ts.NeedsNATS())
		}
	})
	t.Run("an unknown service is a usage error that lists the known ones", func(t *testing.T) {
		err := parseTS(t, "--task-service", "exchange").Check()
		if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, ErrUnknown) {
			t.Errorf("check: %v, want a usage error wrapping ErrUnknown", err)
		}
	})
	t.Run("opening the fake connects once and passes a failure to connect on", func(t *testing.T) {
		calls := 0
		refused := errors.New("refused")
		_, err := parseTS(t).Open(context.Background(), func() (*nats.Conn, error) {
			calls++
			return nil, refused
		}, time.Second)
		if calls != 1 || !errors.Is(err, refused) {
			t.Errorf("open: %d connects, error %v; want 1 and the connect error", calls, err)
		}
	})
	noEnv := func(string) string { return "" }
	const url = "http://127.0.0.1:5232/alice/tasks/"
	dir := t.TempDir()
	file := func(name, content string) string { return writeFileIn(t, dir, name, content) }
	usageErr := func(t *testing.T, ts *Config, want ...string) error {
		t.Helper()
		err := ts.Check()
		if !errors.Is(err, cli.ErrUsage) {
			t.Fatalf("check: %v, want a usage error", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("check: %q lacks %q", err, w)
			}
		}
		return err
	}
	for _, flagArgs := range [][]string{
		{"--caldav-url", url},
		{"--caldav-user", "alice"},
		{"--caldav-password-file", file("pw-fake", "secret")},
	} {
		t.Run("with the fake service "+flagArgs[0]+" is refused", func(t *testing.T) {
			ts := parseTS(t, append([]string{"--task-service", "fake"}, flagArgs...)...)
			_ = usageErr(t, ts, "need --task-service caldav")
		})
	}
	t.Run("caldav needs a collection: --caldav-url, --destination or --destinations-file", func(t *testing.T) {
		ts := parseTS(t, "--task-service", "caldav")
		ts.getenv = noEnv
		_ = usageErr(t, ts, "needs a calendar collection", "--caldav-url")
	})
	for _, content := range []string{"", "\n", "\r\n"} {
		t.Run("an empty password file is refused", func(t *testing.T) {
			ts := parseTS(t, "--task-service", "caldav", "--caldav-url", url, "--caldav-user", "alice",
				"--caldav-password-file", file("empty", content))
			_ = usageErr(t, ts, "--caldav-password-file", "is empty")
		})
	}
	t.Run("a missing password file is refused", func(t *testing.T) {
		ts := parseTS(t, "--task-service", "caldav", "--caldav-url", url, "--caldav-user", "alice",
			"--caldav-password-file", filepath.Join(dir, "missing"))
		_ = usageErr(t, ts, "--caldav-password-file")
	})
	t.Run("a password without a user is refused", func(t *testing.T) {
		ts := parseTS(t, "--task-service", "caldav", "--caldav-url", url, "--caldav-password-file", file("pw", "s3cret-file\n"))
		err := usageErr(t, ts, "no --caldav-user")
		ts = parseTS(t, "--task-service", "caldav", "--caldav-url", url)
		ts.getenv = func(k string) string {
			if k == CalDAVPasswordEnv {
				return "s3cret-env"
			}
			return ""
		}
		err2 := usageErr(t, ts, "no --caldav-user", "$"+CalDAVPasswordEnv)
		for _, e := range []error{err, err2} {
			if strings.Contains(e.Error(), "s3cret") {
				t.Errorf("check: %q shows the password", e)
			}
		}
	})
	t.Run("a URL with user info is refused without echoing it", func(t *testing.T) {
		ts := parseTS(t, "--task-service", "caldav", "--caldav-url", "https://alice:s3cret-url@dav.example.org/alice/tasks/")
		ts.getenv = noEnv
		err := usageErr(t, ts, "--caldav-url", "must not carry a user or password")
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice:") || strings.Contains(err.Error(), "dav.example.org") {
			t.Errorf("check: %q echoes the URL", err)
		}
	})
	t.Run("the password comes from the file, else the environment, and caldav needs no NATS", func(t *testing.T) {
		env := func(k string) string {
			if k == CalDAVPasswordEnv {
				return "from-env"
			}
			return ""
		}
		ts := parseTS(t, "--task-service", "caldav", "--caldav-url", url, "--caldav-user", "alice",
			"--caldav-password-file", file("pw-both", "from-file\r\n"))
		ts.getenv = env
		if err := ts.Check(); err != nil || ts.calDAVPassword != "from-file" {
			t.Errorf("check: %v; password from the file %v, want it without its line end", err, ts.calDAVPassword == "from-file")
		}
		ts = parseTS(t, "--task-service", "caldav", "--caldav-url", url, "--caldav-user", "alice")
		ts.getenv = env
		if err := ts.Check(); err != nil || ts.calDAVPassword != "from-env" {
			t.Errorf("check: %v; password from the environment %v", err, ts.calDAVPassword == "from-env")
		}
		if ts.NeedsNATS() {
			t.Error("caldav needs NATS")
		}
		ts.LoseReplies = true
		svc, err := ts.Open(context.Background(), func() (*nats.Conn, error) {
			t.Error("opening caldav connected to NATS")
			return nil, errors.New("no")
		}, time.Second)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if target := svc.Target(); svc.Service == nil || target.Delete == nil || target.LoseReply == nil || target.Count == nil || svc.reach == nil {
			t.Errorf("the caldav target lacks a part: %+v", target)
		}
	})
}

// redmineKey stands for a Redmine API key; no output of a command may show
// it.
const redmineKey = "REDMINE-KEY-7d31e0"

// parseRedmineTS parses args into task service flags whose environment is
// env (nil: empty).
func parseRedmineTS(t *testing.T, env map[string]string, args ...string) *Config {
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
	withKey := map[string]string{RedmineAPIKeyEnv: redmineKey}
	wantUsage := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, cli.ErrUsage) {
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
		if err := ts.Check(); err != nil {
			t.Fatalf("check: %v", err)
		}
		if !ts.NeedsNATS() || !ts.NeedsLedger() {
			t.Errorf("needs NATS %v, needs the ledger %v; want both", ts.NeedsNATS(), ts.NeedsLedger())
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
			{"a request lifetime", "--redmine-request-lifetime", "10m"},
		} {
			t.Run("with "+kind+" "+fl.name+" ("+fl.flag+") is refused, naming the kind it needs", func(t *testing.T) {
				args := []string{"--task-service", kind, fl.flag, fl.value}
				if kind == "caldav" {
					args = append(args, "--caldav-url", "http://127.0.0.1:1/tasks/")
				}
				err := parseRedmineTS(t, withKey, args...).Check()
				wantUsage(t, err, fl.flag, "need --task-service redmine")
			})
		}
	}
	t.Run("with redmine a caldav flag is refused", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--caldav-url", "http://127.0.0.1:1/tasks/")...).Check()
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
		{"a negative --redmine-request-lifetime is refused", append(redmineArgs, "--redmine-request-lifetime", "-1s"), "--redmine-request-lifetime -1s is negative"},
		{"a URL that is not http or https is refused", []string{"--task-service", "redmine", "--redmine-url", "ftp://redmine.example.org/", "--redmine-project", "ops"}, "--redmine-url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantUsage(t, parseRedmineTS(t, withKey, c.args...).Check(), c.want)
		})
	}

	t.Run("the API key comes from the file (trimmed), before the environment", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{RedmineAPIKeyEnv: "from-env"},
			append(redmineArgs, "--redmine-api-key-file", writeTestFile(t, "key", redmineKey+"\r\n"))...)
		if err := ts.Check(); err != nil || ts.redmineAPIKey != redmineKey {
			t.Errorf("check: %v; key from the file: %v", err, ts.redmineAPIKey == redmineKey)
		}
	})
	t.Run("without a file the API key comes from $REDMINE_API_KEY", func(t *testing.T) {
		ts := parseRedmineTS(t, withKey, redmineArgs...)
		if err := ts.Check(); err != nil || ts.redmineAPIKey != redmineKey {
			t.Errorf("check: %v; key from the environment: %v", err, ts.redmineAPIKey == redmineKey)
		}
	})
	t.Run("no API key at all is refused, naming where it comes from", func(t *testing.T) {
		wantUsage(t, parseRedmineTS(t, nil, redmineArgs...).Check(), "--redmine-api-key-file", "$"+RedmineAPIKeyEnv)
	})
	t.Run("an empty API key file is refused and the environment is not used instead", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--redmine-api-key-file", writeTestFile(t, "empty", "\n"))...).Check()
		wantUsage(t, err, "--redmine-api-key-file", "is empty")
	})
	t.Run("a missing API key file is refused", func(t *testing.T) {
		err := parseRedmineTS(t, withKey, append(redmineArgs, "--redmine-api-key-file", filepath.Join(t.TempDir(), "missing"))...).Check()
		wantUsage(t, err, "--redmine-api-key-file")
	})

	for _, c := range []struct {
		name          string
		flag, value   string
		want          time.Duration // the lock's TTL
		refusedSaying string
	}{
		{"the lock TTL defaults to twice the call timeout and 10s", "", "", 20 * time.Second, ""},
		{"a lock TTL longer than the call timeout is taken", "--redmine-lock-ttl", "6s", 6 * time.Second, ""},
		{"a lock TTL equal to the call timeout is refused", "--redmine-lock-ttl", "5s", 0, "not longer than the call timeout 5s"},
		{"a lock TTL shorter than the call timeout is refused", "--redmine-lock-ttl", "3s", 0, "not longer than the call timeout 5s"},
		{"a request lifetime shorter than the call timeout is refused", "--redmine-request-lifetime", "4s", 0, "shorter than the call timeout 5s"},
		{"a request lifetime equal to the call timeout is taken", "--redmine-request-lifetime", "5s", 20 * time.Second, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := redmineArgs
			if c.flag != "" {
				args = append(args, c.flag, c.value)
			}
			ts := parseRedmineTS(t, withKey, args...)
			if err := ts.Check(); err != nil {
				t.Fatal(err)
			}
			const timeout = 5 * time.Second
			err := ts.CheckCallTimeout(timeout)
			if c.refusedSaying != "" {
				wantUsage(t, err, c.flag+" "+c.value, c.refusedSaying)
				return
			}
			if err != nil || ts.lockTTL(timeout) != c.want {
				t.Errorf("check: %v; TTL %s, want %s", err, ts.lockTTL(timeout), c.want)
			}
			if _, err := redmine.New(ts.redmineConfig(refusingLocker{}, timeout)); err != nil {
				t.Fatalf("the adapter refuses what the flags took: %v", err)
			}
		})
	}
}

// open builds the redmine service on the intent ledger: it provisions the
// ledger only when asked, and gives every part the probe and verify use.
func TestOpeningRedmineTakesTheIntentLedger(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() (*nats.Conn, error) { return env.NC, nil }
	t.Run("without provisioning, a missing ledger bucket is refused and none is made", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{RedmineAPIKeyEnv: redmineKey}, redmineArgs...)
		if err := ts.Check(); err != nil {
			t.Fatal(err)
		}
		_, err := ts.Open(ctx, connect, 5*time.Second)
		if !errors.Is(err, ledger.ErrNoBucket) {
			t.Errorf("open: %v, want the missing ledger bucket", err)
		}
		if _, err := env.JS.KeyValue(ctx, ledger.Bucket); err == nil {
			t.Error("open made the ledger bucket without provisioning")
		}
	})
	t.Run("with provisioning, it makes the bucket and the service has every part", func(t *testing.T) {
		ts := parseRedmineTS(t, map[string]string{RedmineAPIKeyEnv: redmineKey}, redmineArgs...)
		if err := ts.Check(); err != nil {
			t.Fatal(err)
		}
		ts.ProvisionLedger, ts.LedgerReplicas, ts.LoseReplies = true, 1, true
		svc, err := ts.Open(ctx, connect, 5*time.Second)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		target := svc.Target()
		if svc.Service == nil || target.Delete == nil || target.LoseReply == nil || target.Count == nil || target.Naive == nil ||
			target.Find == nil || svc.reach == nil || svc.Lister == nil || svc.ledger == nil {
			t.Errorf("the redmine target lacks a part: %+v", target)
		}
		if target.Class != ClassNoKey {
			t.Errorf("class %q, want %q", target.Class, ClassNoKey)
		}
		where, err := svc.KeepDeletedKeys(ctx, env.JS, false, 1)
		if err != nil || !strings.Contains(where, ledger.Bucket) {
			t.Errorf("KeepDeletedKeys: %q, %v; want the ledger open took", where, err)
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
	ts := parseRedmineTS(t, map[string]string{RedmineAPIKeyEnv: redmineKey},
		"--task-service", "redmine", "--redmine-url", srv.URL+"/", "--redmine-project", "ops")
	if err := ts.Check(); err != nil {
		t.Fatal(err)
	}
	ts.ProvisionLedger = true
	svc, err := ts.Open(ctx, func() (*nats.Conn, error) { return env.NC, nil }, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
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
