package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The redmine flags as the commands take them; the flags' own checks are
// cmd/internal/service's tests.

// redmineKey stands for a Redmine API key; no output of a command may show
// it.
const redmineKey = "REDMINE-KEY-7d31e0"

const redmineURL = "http://127.0.0.1:1/"

// redmineArgs are the flags of a well-formed redmine service.
var redmineArgs = []string{"--task-service", "redmine", "--redmine-url", redmineURL, "--redmine-project", "ops"}

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

func writeFileIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The commands refuse what the flags refuse, as usage errors, and never
// show the API key: not in an error, not on stdout or stderr, not in --help.
func TestRedmineFlagsInTheCommandsShowNoKey(t *testing.T) {
	t.Setenv(service.RedmineAPIKeyEnv, redmineKey)
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
			for _, want := range []string{"redmine", "-redmine-url", "-redmine-project", "-redmine-field", "-redmine-api-key-file", "$" + service.RedmineAPIKeyEnv, "-redmine-lock-ttl"} {
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
			t.Setenv(service.RedmineAPIKeyEnv, c.key)
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
