package davtest

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/proctest"
)

// Kind names a CalDAV server.
type Kind string

// The servers davtest runs, as Debian packages them.
const (
	Radicale Kind = "radicale"
	Xandikos Kind = "xandikos"
)

// Kinds are all the servers, for a test that runs against each.
func Kinds() []Kind { return []Kind{Radicale, Xandikos} }

// Binary is where Debian's package installs the server's command.
func (k Kind) Binary() string { return "/usr/bin/" + string(k) }

// Options change how a server is started.
type Options struct {
	// User and Password, when User is set, turn on HTTP basic
	// authentication with this one user, from an htpasswd file with a
	// plain password (Radicale only). The collection is then the user's,
	// and only the user may use it.
	User, Password string
	// TLS serves HTTPS with a self-signed certificate for 127.0.0.1
	// (Radicale only); CAFile is then the PEM file to trust it by.
	TLS bool
}

// Server is one running (or stopped) CalDAV server.
type Server struct {
	Kind Kind
	// BaseURL is "http://127.0.0.1:<port>".
	BaseURL string
	// CollectionPath is the calendar collection's path, ending in "/";
	// CollectionURL is BaseURL + CollectionPath.
	CollectionPath string
	CollectionURL  string
	// PrincipalPath is the path of the account's principal (RFC 5397),
	// ending in "/"; PrincipalURL is BaseURL + PrincipalPath. On Radicale
	// the principal is also the calendar home; Xandikos keeps the
	// calendars in HomePath, below it.
	PrincipalPath string
	PrincipalURL  string
	HomePath      string
	// Storage is the server's storage folder; CollectionDir the folder in
	// it that holds the collection's resources as files.
	Storage       string
	CollectionDir string
	// LogFile receives the server's stdout and stderr, across restarts.
	LogFile string
	// CAFile, with Options.TLS, is the PEM file of the server's
	// self-signed certificate, to trust it by; Client trusts it.
	CAFile string
	// Client makes the rig's own requests (it trusts CAFile).
	Client *http.Client

	opts Options
	t    testing.TB
	dir  string

	proc    proctest.Process
	mu      sync.Mutex
	markers int
}

// Start starts a server of kind k for the test and makes its calendar
// collection; it is stopped when the test ends. When the server's command
// is not installed the test is skipped, or fails when the environment has
// CI=true (CI installs both packages).
func Start(t testing.TB, k Kind, opts Options) *Server {
	t.Helper()
	Require(t, k)
	if opts.User != "" && k != Radicale {
		t.Fatalf("davtest: authentication is only set up for radicale, not %s", k)
	}
	if opts.TLS && k != Radicale {
		t.Fatalf("davtest: TLS is only set up for radicale, not %s", k)
	}
	dir := t.TempDir()
	s := &Server{Kind: k, opts: opts, t: t, dir: dir,
		Storage: filepath.Join(dir, "storage"),
		LogFile: filepath.Join(dir, "server.log"),
	}
	s.Client = &http.Client{}
	if opts.TLS {
		s.Client = selfSigned(t, s)
	}
	owner := "davtest"
	switch k {
	case Radicale:
		if opts.User != "" {
			owner = opts.User
		}
		s.CollectionPath = "/" + owner + "/tasks/"
		s.PrincipalPath = "/" + owner + "/"
		s.HomePath = s.PrincipalPath
		s.CollectionDir = filepath.Join(s.Storage, "collection-root", owner, "tasks")
	case Xandikos:
		s.CollectionPath = "/user/calendars/tasks/"
		s.PrincipalPath = "/user/"
		s.HomePath = "/user/calendars/"
		s.CollectionDir = filepath.Join(s.Storage, "user", "calendars", "tasks")
	default:
		t.Fatalf("davtest: unknown server %q", k)
	}
	s.proc = proctest.Process{Rig: "davtest", Name: string(k), Dir: dir,
		Env: append(os.Environ(), "HOME="+dir, "PYTHONUNBUFFERED=1", "LC_ALL=C.UTF-8"), OutFile: s.LogFile,
		Grace: 5 * time.Second, Tails: func() string { return "its log:\n" + s.tail() }}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("the end of the %s log (%s):\n%s", k, s.LogFile, s.tail())
		}
	})
	s.proc.StartOnFreePorts(t, 1, s.listen, s.pollClient(), 15*time.Second, 20*time.Millisecond)
	s.makeCollection()
	return s
}

// Require skips the test when k's command is missing, or fails it under
// CI=true.
func Require(t testing.TB, k Kind) {
	t.Helper()
	if _, err := os.Stat(k.Binary()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs %s (Debian's %s package; .ci/run installs it): %v", k.Binary(), k, err)
		}
		t.Skipf("skipping: %s is not installed (apt-get install %s); with CI=true this fails instead", k.Binary(), k)
	}
}

func (s *Server) writeRadicaleConfig(port int) string {
	auth := "type = none"
	rights := "authenticated" // with no authentication: everybody, everything
	if s.opts.User != "" {
		users := filepath.Join(s.dir, "users")
		if err := os.WriteFile(users, []byte(s.opts.User+":"+s.opts.Password+"\n"), 0o600); err != nil {
			s.t.Fatal(err)
		}
		auth = "type = htpasswd\nhtpasswd_filename = " + users + "\nhtpasswd_encryption = plain\ndelay = 0"
		rights = "owner_only"
	}
	tlsConf := ""
	if s.opts.TLS {
		tlsConf = fmt.Sprintf("ssl = True\ncertificate = %s\nkey = %s\n", s.CAFile, filepath.Join(s.dir, "key.pem"))
	}
	conf := fmt.Sprintf(`[server]
hosts = 127.0.0.1:%d
max_connections = 256
%s[auth]
%s
[rights]
type = %s
[storage]
filesystem_folder = %s
[web]
type = none
[logging]
level = info
mask_passwords = True
`, port, tlsConf, auth, rights, s.Storage)
	path := filepath.Join(s.dir, "radicale.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// listen sets the server's URLs and command up for ports[0] and returns
// the URL that answers once it is up.
func (s *Server) listen(ports []int) string {
	port := ports[0]
	scheme := "http"
	if s.opts.TLS {
		scheme = "https"
	}
	s.BaseURL = scheme + "://127.0.0.1:" + strconv.Itoa(port)
	s.CollectionURL = s.BaseURL + s.CollectionPath
	s.PrincipalURL = s.BaseURL + s.PrincipalPath
	switch s.Kind {
	case Radicale:
		s.proc.Argv = []string{s.Kind.Binary(), "--config", s.writeRadicaleConfig(port)}
	case Xandikos:
		s.proc.Argv = []string{s.Kind.Binary(), "-d", s.Storage, "--autocreate",
			"-l", "127.0.0.1", "-p", strconv.Itoa(port), "--current-user-principal", "/user/"}
	}
	return s.BaseURL + "/"
}

func (s *Server) pollClient() *http.Client {
	return &http.Client{Timeout: time.Second, Transport: s.Client.Transport}
}

// start runs the command again on its port and waits until the server
// answers HTTP.
func (s *Server) start() {
	s.t.Helper()
	s.proc.Start(s.t, s.BaseURL+"/", s.pollClient(), 15*time.Second, 20*time.Millisecond)
}

func (s *Server) tail() string { return proctest.TailOf(s.LogFile, 4000) }

// makeCollection makes the calendar collection (and, on Radicale, the
// principal collection above it).
func (s *Server) makeCollection() {
	s.t.Helper()
	if s.Kind == Radicale {
		parent := s.CollectionPath[:strings.LastIndex(strings.TrimSuffix(s.CollectionPath, "/"), "/")+1]
		if code := s.Do("MKCOL", parent, nil); code != http.StatusCreated && code != http.StatusMethodNotAllowed && code != http.StatusConflict {
			s.t.Fatalf("davtest: MKCOL %s on %s answered %d", parent, s.Kind, code)
		}
	}
	if code := s.Do("MKCALENDAR", s.CollectionPath, nil); code != http.StatusCreated {
		s.t.Fatalf("davtest: MKCALENDAR %s on %s answered %d; its log:\n%s", s.CollectionPath, s.Kind, code, s.tail())
	}
}

// MakeCalendar makes a calendar collection at path (MKCALENDAR, RFC 4791
// §5.3.1) with a display name and, when components are given, a
// supported-calendar-component-set of them (for example "VEVENT" alone:
// a calendar for events only). Radicale keeps both; Xandikos 0.2.8 keeps
// the display name and answers 404 for the component set, making a
// calendar that accepts every component. It fails the test unless the
// server answers 201.
func (s *Server) MakeCalendar(path, displayName string, components ...string) {
	s.t.Helper()
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?><c:mkcalendar xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:set><d:prop>`)
	if displayName != "" {
		b.WriteString("<d:displayname>")
		_ = xml.EscapeText(&b, []byte(displayName))
		b.WriteString("</d:displayname>")
	}
	if len(components) > 0 {
		b.WriteString("<c:supported-calendar-component-set>")
		for _, c := range components {
			fmt.Fprintf(&b, `<c:comp name="%s"/>`, c)
		}
		b.WriteString("</c:supported-calendar-component-set>")
	}
	b.WriteString("</d:prop></d:set></c:mkcalendar>")
	code, err := s.do("MKCALENDAR", path, []byte(b.String()), http.Header{"Content-Type": {"application/xml; charset=utf-8"}})
	if err != nil {
		s.t.Fatalf("davtest: MKCALENDAR %s: %v", path, err)
	}
	if code != http.StatusCreated {
		s.t.Fatalf("davtest: MKCALENDAR %s on %s answered %d; its log:\n%s", path, s.Kind, code, s.tail())
	}
}

// MakeCollection makes a plain WebDAV collection at path (MKCOL), not a
// calendar. Xandikos makes one anywhere; Radicale (3.1) only at the top
// (a principal's) and refuses one below it. It fails the test unless the
// server answers 201.
func (s *Server) MakeCollection(path string) {
	s.t.Helper()
	if code := s.Do("MKCOL", path, nil); code != http.StatusCreated {
		s.t.Fatalf("davtest: MKCOL %s on %s answered %d; its log:\n%s", path, s.Kind, code, s.tail())
	}
}

// Do sends one request to the server, with the configured user's
// credentials when there is one, and returns the status code. It fails the
// test when the server cannot be reached.
func (s *Server) Do(method, path string, body []byte) int {
	s.t.Helper()
	code, err := s.do(method, path, body, nil)
	if err != nil {
		s.t.Fatalf("davtest: %s %s: %v", method, path, err)
	}
	return code
}

// Put stores body at path with an unconditional PUT, as another calendar
// client would, and returns the status code.
func (s *Server) Put(path string, body []byte) int {
	s.t.Helper()
	code, err := s.do(http.MethodPut, path, body, http.Header{"Content-Type": {"text/calendar; charset=utf-8"}})
	if err != nil {
		s.t.Fatalf("davtest: PUT %s: %v", path, err)
	}
	return code
}

func (s *Server) do(method, path string, body []byte, h http.Header) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if s.opts.User != "" {
		req.SetBasicAuth(s.opts.User, s.opts.Password)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s). Its storage and
// log stay. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.proc.Stop() }

// Restart stops the server and starts it again on the same port with the
// same storage.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Running reports whether the server's process is running.
func (s *Server) Running() bool {
	return s.proc.Running()
}

// ResourcePath is the path of the resource name in the collection.
func (s *Server) ResourcePath(name string) string { return s.CollectionPath + name }

// StoredNames lists the .ics files in the collection's folder, sorted:
// the resources the collection holds, as the server stored them.
func (s *Server) StoredNames() []string {
	s.t.Helper()
	entries, err := os.ReadDir(s.CollectionDir)
	if err != nil {
		s.t.Fatalf("davtest: reading the collection's folder: %v", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".ics") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Stored returns the bytes of the stored resource name, or nil when there
// is no such file.
func (s *Server) Stored(name string) []byte {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.CollectionDir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// Received counts the requests with method for path (a URL path,
// compared after percent-decoding) that the server's log shows.
func (s *Server) Received(method, path string) int {
	s.t.Helper()
	n := 0
	for _, e := range s.LogEntries() {
		if e.Received && e.Method == method && e.Path == decodePath(path) {
			n++
		}
	}
	return n
}

// Answered counts the answers with status to requests with method for
// path that the server's log shows.
func (s *Server) Answered(method, path string, status int) int {
	s.t.Helper()
	n := 0
	for _, e := range s.LogEntries() {
		if e.Status == status && e.Method == method && e.Path == decodePath(path) {
			n++
		}
	}
	return n
}

// PUTs counts the PUT requests for path in the server's log: requests
// received.
func (s *Server) PUTs(path string) int { return s.Received(http.MethodPut, path) }

// Creates counts the 201 Created answers to PUTs of path in the server's
// log: creates executed.
func (s *Server) Creates(path string) int {
	return s.Answered(http.MethodPut, path, http.StatusCreated)
}

// LogEntries parses the server's log (see the package documentation);
// when the server is running it first waits until every request answered
// so far is in the log.
func (s *Server) LogEntries() []Entry {
	s.t.Helper()
	if s.Running() {
		s.syncLog()
	}
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		s.t.Fatal(err)
	}
	return ParseLog(s.Kind, b)
}

// syncLog sends a marker request and waits until the log shows it.
func (s *Server) syncLog() {
	s.t.Helper()
	s.mu.Lock()
	s.markers++
	marker := fmt.Sprintf("/davtest-log-marker-%d", s.markers)
	s.mu.Unlock()
	if _, err := s.do(http.MethodGet, marker, nil, nil); err != nil {
		s.t.Fatalf("davtest: marker request: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(s.LogFile)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, e := range ParseLog(s.Kind, b) {
			if e.Path == marker && e.Status != 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("davtest: the marker request %s is not in the %s log after 10s", marker, s.Kind)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
