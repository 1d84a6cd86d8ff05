package consoletest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// The seed's digests, as the fixtures show them.
const (
	SeedCandidateDigest = "sha256:8ab0a8135ae2223239602e5651807fdaa5ce74c1dccb239174d5e968d10ea970"
	SeedRequestDigest   = "sha256:3fd3958b68b92fcf34b6c14ccd0c2175e633377704dedac864ce29b72eb530a8"
)

// FixtureDir returns testdata/console at the project root, found from this
// file's place in the source tree, so that tests in any directory copy the
// same files.
func FixtureDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("consoletest: no source path to find testdata/console from")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "console")
}

// CopyFixtures copies testdata/console into a fresh folder.
func CopyFixtures(t testing.TB) string {
	t.Helper()
	from := FixtureDir(t)
	dir := t.TempDir()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		WriteFile(t, dir, e.Name(), b)
	}
	return dir
}

// WriteFile writes b to dir/name, failing the test if it cannot.
func WriteFile(t testing.TB, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// EditJSON rewrites a JSON file with f applied to its members, and returns
// what it wrote.
func EditJSON(t testing.TB, path string, f func(m map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := scenario.Edit(b, f)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	return edited
}

// ticking is a clock that starts at the seed's approval time and moves a
// second on each reading, so that pages show stable times.
func ticking() func() time.Time {
	var mu sync.Mutex
	t := scenario.ApprovedAt
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := t
		t = t.Add(time.Second)
		return now
	}
}

// Server is a console served over HTTP for a test, with a cookie jar that
// opened the console's start address.
type Server struct {
	*httptest.Server
	Console *console.Console
	Dir     string
	Jar     http.CookieJar
}

// Start serves a console of the candidates in dir on env, with edit (when
// not nil) applied to its configuration and wrap (when not nil) around its
// handler, and signs Jar in.
func Start(t testing.TB, env *testenv.Env, dir string, edit func(*console.Config), wrap func(http.Handler) http.Handler) *Server {
	t.Helper()
	cfg := console.Config{
		Dir:       dir,
		JetStream: env.JS,
		By:        scenario.Reviewer,
		Wait:      20 * time.Second,
		Server:    env.URL(),
		Clock:     ticking(),
		Logger:    env.Log,
	}
	ts := httptest.NewUnstartedServer(nil)
	hosts, err := console.DefaultHosts(ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.AllowedHosts = hosts
	if edit != nil {
		edit(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		ts.Close()
		t.Fatal(err)
	}
	h := c.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts.Config.Handler = h
	ts.Start()
	// Close the console first: it ends the event streams the server waits for.
	t.Cleanup(ts.Close)
	t.Cleanup(c.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Server: ts, Console: c, Dir: dir, Jar: jar}
	s.signIn(t)
	return s
}

// signIn opens the console's start address, which sets the session cookie
// in the jar and redirects to the list.
func (s *Server) signIn(t testing.TB) {
	t.Helper()
	resp, err := s.HTTPClient().Get(s.URL + s.Console.LoginPath())
	if err != nil {
		t.Fatalf("opening the start address: %v", err)
	}
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("opening the start address: status %d, Location %q\n%s", resp.StatusCode, loc, body)
	}
}

// HTTPClient does not follow redirects, so that tests see them, and sends
// the session cookie (none when Jar is nil).
func (s *Server) HTTPClient() *http.Client {
	return &http.Client{
		Jar:           s.Jar,
		Timeout:       60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
