package redminetest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/proctest"
)

// debianRedmine is where Debian's redmine package installs the application.
const debianRedmine = "/usr/share/redmine"

// DefaultFieldName is the mark's custom field's name when Options.FieldName
// is empty; it is the adapter's default too.
const DefaultFieldName = "sendtwice key"

// Options change how a server is prepared.
type Options struct {
	// FieldName names the issue custom field that holds the mark
	// (default DefaultFieldName).
	FieldName string
}

// Server is one private Redmine, running or stopped.
type Server struct {
	// URL is "http://127.0.0.1:<port>", with no trailing slash.
	URL string
	// APIKey is the administrator's REST API key (header
	// X-Redmine-API-Key).
	APIKey string
	// Project is the seeded project's identifier, ProjectID its number.
	Project   string
	ProjectID int
	// FieldID and FieldName are the mark's issue custom field's.
	FieldID   int
	FieldName string
	// LogFile is Redmine's own request log (production.log), kept across
	// restarts; OutFile receives the server process's stdout and stderr.
	LogFile string
	OutFile string
	// Dir is the instance's folder: app/ (the application tree), db/ (the
	// SQLite database), the process's pid file and output.
	Dir string

	t       testing.TB
	env     []string
	pidFile string
	page    int // issues per page of a listing; 0: 100

	proc proctest.Process
}

// required are files of the packages Redmine needs here, with the
// package that installs each.
var required = []struct{ path, pkg string }{
	{filepath.Join(debianRedmine, "bin", "rails"), "redmine"},
	{"/usr/lib/ruby/vendor_ruby/sqlite3.rb", "redmine-sqlite"},
	{"/usr/bin/puma", "puma"},
}

// Require skips the test when Redmine, its SQLite support or Puma is not
// installed, or fails it when the environment has CI=true (CI installs
// them).
func Require(t testing.TB) {
	t.Helper()
	for _, need := range required {
		if _, err := os.Stat(need.path); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("this test needs Redmine: %s is missing (Debian's %s package; .ci/run installs redmine, redmine-sqlite and puma): %v", need.path, need.pkg, err)
			}
			t.Skipf("skipping: Redmine is not installed (%s is missing; apt-get install redmine redmine-sqlite puma, with redmine/dbconfig-install preseeded to false); with CI=true this fails instead", need.path)
		}
	}
}

// Start starts a private Redmine on 127.0.0.1 for the test, with a
// database of its own copied from the template (prepared once per test
// binary, see the package documentation); it is stopped when the test
// ends. It calls Require first.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	if opts.FieldName == "" {
		opts.FieldName = DefaultFieldName
	}
	began := time.Now()
	tpl, err := getTemplate(opts.FieldName)
	if err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	dir := t.TempDir()
	if err := copyTree(tpl.dir, dir, func(rel string) bool {
		switch rel {
		case "app/instances/default/log", "app/instances/default/tmp", "prepare.log", "seed.rb", "template.json":
			return true
		}
		return false
	}); err != nil {
		t.Fatalf("redminetest: copying the prepared Redmine: %v", err)
	}
	if err := layInstance(dir); err != nil {
		t.Fatal(err)
	}
	s := &Server{
		APIKey:    tpl.APIKey,
		Project:   projectIdentifier,
		ProjectID: tpl.ProjectID,
		FieldID:   tpl.FieldID,
		FieldName: opts.FieldName,
		LogFile:   filepath.Join(dir, "app", "instances", "default", "log", "production.log"),
		OutFile:   filepath.Join(dir, "server.out"),
		Dir:       dir,
		t:         t,
		env:       railsEnv(dir),
		pidFile:   filepath.Join(dir, "server.pid"),
	}
	s.proc = proctest.Process{Rig: "redminetest", Name: "Redmine",
		Dir: filepath.Join(dir, "app"), Env: s.env, OutFile: s.OutFile, Group: true, Grace: 10 * time.Second, Tails: s.tails}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("%s", s.tails())
			if log, err := os.ReadFile(s.LogFile); err == nil {
				if w := FailedWrites(log, 5); w != "" {
					t.Logf("Redmine's writes answered with no 2xx (the first 5), from its log:\n%s", w)
				}
			}
		}
	})
	copied := time.Now()
	os.Remove(s.pidFile)
	s.proc.StartOnFreePorts(t, 1, func(ports []int) string {
		s.URL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		s.proc.Argv = []string{"bin/rails", "server", "-e", "production", "-b", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "-P", s.pidFile}
		return s.URL + "/"
	}, s.pollClient(), startTimeout, 50*time.Millisecond)
	how := "the template from " + tpl.dir
	if tpl.fresh {
		how = "the template this test binary prepared in " + tpl.Took
	}
	t.Logf("redminetest: Redmine on %s in %s (%s; waited %s for it, copied it in %s, booted in %s)",
		s.URL, time.Since(began).Round(time.Millisecond), how, ready.Sub(began).Round(time.Millisecond),
		copied.Sub(ready).Round(time.Millisecond), time.Since(copied).Round(time.Millisecond))
	return s
}

// startTimeout bounds a boot (about 3 s on two idle cores).
const startTimeout = 90 * time.Second

// start runs Puma in its own process group and waits until it answers
// HTTP.
func (s *Server) start() {
	s.t.Helper()
	os.Remove(s.pidFile)
	s.proc.Start(s.t, s.URL+"/", s.pollClient(), startTimeout, 50*time.Millisecond)
}

func (s *Server) pollClient() *http.Client { return &http.Client{Timeout: 2 * time.Second} }

// tails is the end of the server's output and of its request log, for a
// failure's message.
func (s *Server) tails() string {
	return fmt.Sprintf("the end of Redmine's output (%s):\n%s\nthe end of Redmine's log (%s):\n%s",
		s.OutFile, proctest.TailOf(s.OutFile, 2000), s.LogFile, proctest.TailOf(s.LogFile, 4000))
}

// Stop stops the server: SIGTERM to its process group, SIGKILL after
// 10 s. Its database and logs stay. Stopping a stopped server does
// nothing.
func (s *Server) Stop() { s.proc.Stop() }

// Restart stops the server and starts it again on the same port with the
// same database.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Running reports whether the server's process is running.
func (s *Server) Running() bool { return s.proc.Running() }

// Rails runs Ruby code with bin/rails runner in the server's application,
// on its database (the server may be running), and returns what it
// printed; it fails the test when the code raises. It takes about as long
// as a boot: it is for what the REST API cannot change, such as the
// custom field's settings (CustomField.find(s.FieldID)).
func (s *Server) Rails(t testing.TB, code string) string {
	t.Helper()
	f, err := os.CreateTemp(s.Dir, "runner-*.rb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(code); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cmd := exec.Command("bin/rails", "runner", f.Name())
	cmd.Dir = filepath.Join(s.Dir, "app")
	cmd.Env = s.env
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("redminetest: bin/rails runner: %v\n%s%s", err, out.Bytes(), lastBytes(errOut.String(), 3000))
	}
	return out.String()
}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
