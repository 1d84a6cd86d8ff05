package davtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The task clients a person uses with a CalDAV server, as Debian packages
// them: vdirsyncer keeps a copy of a collection in a local folder, and
// todoman lists and changes the tasks in that folder.
const (
	VdirsyncerBinary = "/usr/bin/vdirsyncer"
	TodomanBinary    = "/usr/bin/todoman"
)

// RequireClients skips the test when vdirsyncer or todoman is missing, or
// fails it under CI=true (.ci/run installs both).
func RequireClients(t testing.TB) {
	t.Helper()
	requireCommands(t, VdirsyncerBinary, TodomanBinary)
}

// requireCommands skips t, or fails it under CI=true, naming the first of
// bins (Debian packages named as their commands) that is missing.
func requireCommands(t testing.TB, bins ...string) {
	t.Helper()
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			pkg := filepath.Base(bin)
			if os.Getenv("CI") == "true" {
				t.Fatalf("this test needs %s (Debian's %s package; .ci/run installs it): %v", bin, pkg, err)
				return
			}
			t.Skipf("skipping: %s is not installed (apt-get install %s); with CI=true this fails instead", bin, pkg)
			return
		}
	}
}

// Clients is one person's task clients on a Server's collection: a
// vdirsyncer pair between the collection and a local folder, and todoman
// reading that folder. Each has its own configuration, status and cache in
// the test's temporary directory; the user's own configuration is never
// read (HOME is the temporary directory too).
type Clients struct {
	// Folder is the local copy of the collection: one .ics file per task.
	// todoman shows it as the list named "tasks".
	Folder string
	// TZ is the time zone the clients show times in (their TZ variable).
	TZ string

	t          testing.TB
	dir        string
	vdirConfig string
	todoConfig string
	env        []string
	discovered bool
}

// NewClients configures vdirsyncer and todoman for s's collection, showing
// times in the zone tz (an IANA name, such as "Asia/Shanghai"). When s
// was started with a user, vdirsyncer logs in as that user (the password
// is read from a file, never from its configuration). Nothing is synced
// yet: call Sync.
func NewClients(t testing.TB, s *Server, tz string) *Clients {
	t.Helper()
	RequireClients(t)
	if _, err := time.LoadLocation(tz); err != nil {
		t.Fatalf("davtest: time zone %q: %v", tz, err)
	}
	dir := t.TempDir()
	c := &Clients{t: t, dir: dir, TZ: tz,
		Folder:     filepath.Join(dir, "calendars", "tasks"),
		vdirConfig: filepath.Join(dir, "vdirsyncer.conf"),
		todoConfig: filepath.Join(dir, "todoman.py"),
	}
	for _, d := range []string{c.Folder, filepath.Join(dir, "status")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	login := ""
	if s.opts.User != "" {
		secret := filepath.Join(dir, "password")
		if err := os.WriteFile(secret, []byte(s.opts.Password), 0o600); err != nil {
			t.Fatal(err)
		}
		login = fmt.Sprintf("username = %s\npassword.fetch = [\"command\", \"cat\", %s]\n", quote(s.opts.User), quote(secret))
	}
	// collections = null: the pair syncs exactly the configured collection,
	// and discover asks nothing.
	vconf := fmt.Sprintf(`[general]
status_path = %s

[pair tasks]
a = "tasks_local"
b = "tasks_remote"
collections = null
conflict_resolution = "a wins"

[storage tasks_local]
type = "filesystem"
path = %s
fileext = ".ics"

[storage tasks_remote]
type = "caldav"
url = %s
%s`, quote(filepath.Join(dir, "status")+"/"), quote(c.Folder+"/"), quote(s.CollectionURL), login)
	tconf := fmt.Sprintf(`path = %s
cache_path = %s
date_format = "%%Y-%%m-%%d"
time_format = "%%H:%%M"
`, quote(filepath.Join(dir, "calendars", "*")), quote(filepath.Join(dir, "todoman-cache.sqlite3")))
	for path, body := range map[string]string{c.vdirConfig: vconf, c.todoConfig: tconf} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "TZ=" + tz,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	return c
}

// pyString quotes s as a Python string literal (todoman's configuration is
// Python).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Sync runs vdirsyncer discover (the first time) and sync, in both
// directions: tasks new or changed on the server come into Folder, tasks
// changed in Folder (by todoman) go to the server. It fails the test when
// either command fails.
func (c *Clients) Sync() {
	c.t.Helper()
	if !c.discovered {
		c.run(VdirsyncerBinary, "-c", c.vdirConfig, "discover", "tasks")
		c.discovered = true
	}
	c.run(VdirsyncerBinary, "-c", c.vdirConfig, "sync", "tasks")
}

// Todo runs todoman with its private configuration and no colour, and
// returns what it prints on standard output. It fails the test when
// todoman fails.
func (c *Clients) Todo(args ...string) string {
	c.t.Helper()
	return c.run(TodomanBinary, append([]string{"-c", c.todoConfig, "--color", "never"}, args...)...)
}

// Todo is one task as todoman lists it with --porcelain (its stable JSON
// format).
type Todo struct {
	ID          int    `json:"id"`
	List        string `json:"list"`
	Summary     string `json:"summary"`
	Description string `json:"description"`
	// Due is a Unix time (a date-only due date: its local midnight), nil
	// without a due date.
	Due         *int64 `json:"due"`
	Completed   bool   `json:"completed"`
	CompletedAt *int64 `json:"completed_at"`
	Percent     int    `json:"percent"`
}

// List returns the tasks todoman lists with --porcelain, open and
// completed ones alike.
func (c *Clients) List() []Todo {
	c.t.Helper()
	out := c.run(TodomanBinary, "-c", c.todoConfig, "--porcelain", "list", "--status", "ANY")
	var todos []Todo
	if err := json.Unmarshal([]byte(out), &todos); err != nil {
		c.t.Fatalf("davtest: todoman's porcelain list does not parse: %v\n%s", err, out)
	}
	return todos
}

func (c *Clients) run(bin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("davtest: %s %q: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		c.t.Logf("%s %q said on stderr:\n%s", filepath.Base(bin), args, stderr.String())
	}
	return stdout.String()
}
