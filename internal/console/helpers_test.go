package console_test

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/consoletest"
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
	// The second candidate is the seed's, from the same meeting, with
	// another commitment.
	var second document.Candidate
	if err := json.Unmarshal(scenario.Candidate(), &second); err != nil {
		t.Fatal(err)
	}
	second.CandidateID = "cand-0002"
	second.Summary = "有人在會議中說會在發布前把發布說明更新好"
	second.Evidence = []document.Evidence{{Quote: "發布說明我來更新，發布前會弄好", StartMS: 1204000, EndMS: 1207500}}
	notes := indent(t, second)
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

// The console served for a test, and the fixtures' helpers, are
// internal/consoletest's, which the browser tests (tests/console) share.
var (
	copyFixtures = consoletest.CopyFixtures
	writeFile    = consoletest.WriteFile
	editJSON     = consoletest.EditJSON
)

// server is a console served over HTTP for a test, signed in.
type server struct{ *consoletest.Server }

func startConsole(t testing.TB, env *testenv.Env, dir string, edit func(*console.Config)) *server {
	t.Helper()
	return &server{consoletest.Start(t, env, dir, edit, nil)}
}

// anonymous is a client without the session cookie.
func (s *server) anonymous() *server {
	cp := *s.Server
	cp.Jar = nil
	return &server{&cp}
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
	resp, err := s.HTTPClient().Do(req)
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
