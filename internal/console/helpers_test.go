package console_test

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

var updateFixtures = flag.Bool("update", false, "rewrite the console's fixture files under testdata/console at the project root")

const fixtureDir = "../../testdata/console"

// fixtures returns the files of testdata/console: the seed candidate and
// request as notify-checks, and a second candidate from the same meeting.
func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	seed, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	notes := indent(t, document.Candidate{
		SchemaVersion: document.CandidateVersion,
		CandidateID:   "cand-0002",
		Source:        document.Source{TranscriptID: "transcript-weekly-sync-2026-11-27", Version: "v3"},
		Kind:          "commitment",
		Summary:       "有人在會議中說會在發布前把發布說明更新好",
		SpeakerRef:    nil,
		Evidence:      []document.Evidence{{Quote: "發布說明我來更新，發布前會弄好", StartMS: 1204000, EndMS: 1207500}},
	})
	notesReq, err := scenario.Request(notes, "task-request-0101", "intent-0101", "更新發布說明")
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"notify-checks" + console.CandidateSuffix: seed.Original.Candidate,
		"notify-checks" + console.RequestSuffix:   seed.Original.Request,
		"release-notes" + console.CandidateSuffix: notes,
		"release-notes" + console.RequestSuffix:   notesReq,
	}
}

func indent(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestFixtures holds testdata/console in agreement with the seed scenario.
func TestFixtures(t *testing.T) {
	for name, want := range fixtures(t) {
		path := filepath.Join(fixtureDir, name)
		if *updateFixtures {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./internal/console -run TestFixtures -update writes it)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the seed scenario; run go test ./internal/console -run TestFixtures -update", path)
		}
	}
	ents, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 4 {
		t.Errorf("%s holds %d files, want the 4 fixtures", fixtureDir, len(ents))
	}
}

// copyFixtures copies testdata/console into a fresh folder.
func copyFixtures(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, e.Name(), b)
	}
	return dir
}

func writeFile(t testing.TB, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editJSON rewrites a JSON file with f applied to its members.
func editJSON(t testing.TB, path string, f func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, scenario.Edit(b, f), 0o644); err != nil {
		t.Fatal(err)
	}
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

// server is a console served over HTTP for a test, with a cookie jar that
// opened the console's start address.
type server struct {
	*httptest.Server
	Console *console.Console
	Dir     string
	Jar     http.CookieJar
}

func startConsole(t testing.TB, env *testenv.Env, dir string, edit func(*console.Config)) *server {
	t.Helper()
	return startConsoleWith(t, env, dir, edit, nil)
}

// startConsoleWith is startConsole with a wrapper around the handler.
func startConsoleWith(t testing.TB, env *testenv.Env, dir string, edit func(*console.Config), wrap func(http.Handler) http.Handler) *server {
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
	s := &server{Server: ts, Console: c, Dir: dir, Jar: jar}
	s.signIn(t)
	return s
}

// signIn opens the console's start address, which sets the session cookie
// in the jar and redirects to the list.
func (s *server) signIn(t testing.TB) {
	t.Helper()
	p := s.get(t, s.Console.LoginPath())
	if p.status != http.StatusSeeOther || p.location != "/" {
		t.Fatalf("opening the start address: status %d, Location %q\n%s", p.status, p.location, p.body)
	}
}

// client does not follow redirects, so that tests see them, and sends the
// session cookie.
func (s *server) client() *http.Client {
	return &http.Client{
		Jar:           s.Jar,
		Timeout:       60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// anonymous is a client without the session cookie.
func (s *server) anonymous() *server {
	cp := *s
	cp.Jar = nil
	return &cp
}

type page struct {
	status   int
	header   http.Header
	body     string
	location string
}

func (s *server) get(t testing.TB, path string) page {
	t.Helper()
	return s.do(t, http.MethodGet, path, nil, nil)
}

func (s *server) post(t testing.TB, path string, form url.Values) page {
	t.Helper()
	return s.do(t, http.MethodPost, path, form, nil)
}

func (s *server) do(t testing.TB, method, path string, form url.Values, header http.Header) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
		// The client looks cookies up by the Host it sends; this is the
		// same server under another name.
		if s.Jar != nil {
			for _, ck := range s.Jar.Cookies(req.URL) {
				req.AddCookie(ck)
			}
		}
	}
	resp, err := s.client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(b), location: resp.Header.Get("Location")}
}

func (p page) expect(t testing.TB, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d\n%s", p.status, status, p.body)
	}
	for _, s := range contains {
		if !strings.Contains(p.body, s) {
			t.Errorf("the page lacks %q\n%s", s, p.body)
		}
	}
}

func (p page) lacks(t testing.TB, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(p.body, s) {
			t.Errorf("the page contains %q\n%s", s, p.body)
		}
	}
}
