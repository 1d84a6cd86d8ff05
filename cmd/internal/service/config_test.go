package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/sendtwice/sendtwice/internal/cli"
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
	t.Run("caldav needs a collection: --caldav-url, --destination or --destinations", func(t *testing.T) {
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
