package console_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/consoletest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// The seed's digests, as the fixtures show them.
const (
	seedCandidateDigest = consoletest.SeedCandidateDigest
	seedRequestDigest   = consoletest.SeedRequestDigest
)

// approveForm is what the review page's form posts for the seed pair.
func approveForm(by string) url.Values {
	return url.Values{"by": {by}, "candidate_digest": {seedCandidateDigest}, "request_digest": {seedRequestDigest}}
}

func TestListWithoutJavaScript(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), nil)
	p := s.get(t, "/")
	p.expect(t, http.StatusOK,
		"<h2 id=\"awaiting-h\">Awaiting review</h2>",
		`<a href="/c/notify-checks">notify-checks</a>`,
		`<a href="/c/release-notes">release-notes</a>`,
		`<td lang="zh">補上通知設定的檢查項目</td>`,
		"有人在會議中說會把通知設定缺少的檢查項目補上",
		"<code>intent-0001</code>",
	)
	if ct := p.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// The only script is the live-update file; nothing inline.
	if n := strings.Count(p.body, "<script"); n != 1 || !strings.Contains(p.body, `<script src="/static/live.js" defer></script>`) {
		t.Errorf("want exactly the one deferred script, found %d <script tags", n)
	}
	css := s.get(t, "/static/console.css")
	css.expect(t, http.StatusOK, "--fg")
}

func TestReviewShowsBothDocuments(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), nil)
	p := s.get(t, "/c/notify-checks")
	p.expect(t, http.StatusOK,
		`<blockquote lang="zh">通知設定那邊少了幾個檢查項目，我會補上</blockquote>`,
		"<figcaption>at 13:32.0–13:36.5</figcaption>",
		`version <code id="source-version">v3</code>`,
		`<code class="digest" id="candidate-digest">`+seedCandidateDigest+`</code>`,
		`<code class="digest" id="request-digest">`+seedRequestDigest+`</code>`,
		`<dd class="title" lang="zh">補上通知設定的檢查項目</dd>`,
		// Unknown stays unknown.
		`<dd id="assignee"><span class="unknown">unknown</span>`,
		`<dd id="due"><span class="unknown">unknown</span>`,
		`<label for="by">Your name</label>`,
		`value="reviewer-1"`,
		`<input type="hidden" name="candidate_digest" value="`+seedCandidateDigest+`">`,
		`<button type="submit" id="send" aria-describedby="send-hint">Approve and send</button>`,
	)
	p.lacks(t, "Send again", `id="result"`, "<noscript><meta")

	raw := s.get(t, "/c/notify-checks/candidate.json")
	raw.expect(t, http.StatusOK, `"candidate_id": "cand-0001"`)
	if ct := raw.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	s.get(t, "/c/notify-checks/approval.json").expect(t, http.StatusNotFound, "does not exist (yet)")
}

func TestReviewShowsTheRequestsScope(t *testing.T) {
	env := testenv.Start(t)
	dir := copyFixtures(t)
	editJSON(t, filepath.Join(dir, "release-notes.request.json"), func(m map[string]any) { m["scope"] = "team-a" })
	s := startConsole(t, env, dir, nil)
	s.get(t, "/c/notify-checks").expect(t, http.StatusOK,
		`<dd id="scope"><code class="scope">default</code> <span class="hint">the request names no scope, so it lands in the default scope</span></dd>`)
	s.get(t, "/c/release-notes").expect(t, http.StatusOK, `<dd id="scope"><code class="scope">team-a</code>`)
}

// TestEscaping: text from the documents and file names is escaped; Chinese
// text is kept as it is.
func TestEscaping(t *testing.T) {
	env := testenv.Start(t)
	dir := t.TempDir()
	cand := indent(t, document.Candidate{
		SchemaVersion: document.CandidateVersion,
		CandidateID:   "cand-x",
		Source:        document.Source{TranscriptID: "t-1", Version: "v1"},
		Kind:          "commitment",
		Summary:       `<script>alert("summary")</script> 通知`,
		Evidence:      []document.Evidence{{Quote: `"quoted" & <b>bold</b>`, StartMS: 0, EndMS: 1000}},
	})
	req, err := scenario.Request(cand, "task-request-x", "intent-x", `<img src=x onerror=alert(1)>補上 & 'more'`)
	if err != nil {
		t.Fatal(err)
	}
	name := `a&b <i>`
	writeFile(t, dir, name+console.CandidateSuffix, cand)
	writeFile(t, dir, name+console.RequestSuffix, req)
	s := startConsole(t, env, dir, func(c *console.Config) { c.By = `"><script>x</script>` })

	list := s.get(t, "/")
	list.expect(t, http.StatusOK,
		`<a href="/c/a&amp;b%20%3Ci%3E">a&amp;b &lt;i&gt;</a>`,
		`&lt;script&gt;alert(&#34;summary&#34;)&lt;/script&gt; 通知`,
		`&lt;img src=x onerror=alert(1)&gt;補上 &amp; &#39;more&#39;`,
	)
	list.lacks(t, "<script>alert", "<img src=x", "<i>")

	review := s.get(t, "/c/"+url.PathEscape(name))
	review.expect(t, http.StatusOK,
		`&#34;quoted&#34; &amp; &lt;b&gt;bold&lt;/b&gt;`,
		`value="&#34;&gt;&lt;script&gt;x&lt;/script&gt;"`,
		`<h1>Review <span class="name">a&amp;b &lt;i&gt;</span></h1>`,
	)
	review.lacks(t, "<script>alert", "<script>x", "<b>bold", "<img src=x")
}

func TestErrors(t *testing.T) {
	env := testenv.Start(t)
	dir := copyFixtures(t)
	writeFile(t, dir, "broken"+console.CandidateSuffix, []byte(`{"schema_version": "action-candidate.v1", "candidate_id": "c", "candidate_id": "d"}`))
	writeFile(t, dir, "broken"+console.RequestSuffix, []byte(`{}`))
	writeFile(t, dir, "lonely"+console.CandidateSuffix, scenario.Candidate())
	// A request proposed from another version of the candidate.
	other, err := scenario.Request([]byte(strings.Replace(string(scenario.Candidate()), `"v3"`, `"v2"`, 1)), "task-request-9", "intent-9", "x")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "stale"+console.CandidateSuffix, scenario.Candidate())
	writeFile(t, dir, "stale"+console.RequestSuffix, other)
	s := startConsole(t, env, dir, nil)

	t.Run("listed with their problems", func(t *testing.T) {
		p := s.get(t, "/")
		p.expect(t, http.StatusOK, `<a href="/c/broken">broken</a>`, "broken.candidate.json is not an action-candidate.v1",
			`<a href="/c/lonely">lonely</a>`)
		s.get(t, "/c/lonely").expect(t, http.StatusOK, "lonely.request.json is missing", "This request cannot be approved as it is.")
	})
	t.Run("unreadable files cannot be approved", func(t *testing.T) {
		p := s.get(t, "/c/broken")
		p.expect(t, http.StatusOK, `role="alert"><strong>These files cannot be reviewed:</strong> broken.candidate.json is not an action-candidate.v1`, "duplicate")
		p.lacks(t, "Approve and send")
		s.post(t, "/c/broken/send", url.Values{"by": {"ada"}}).expect(t, http.StatusUnprocessableEntity, "this request cannot be approved")
	})
	t.Run("a request proposed from another version", func(t *testing.T) {
		p := s.get(t, "/c/stale")
		p.expect(t, http.StatusOK, "The request does not match the candidate:", `the request was proposed from source version &#34;v2&#34;, but this candidate comes from version &#34;v3&#34;`)
		p.lacks(t, "Approve and send")
	})
	t.Run("not found", func(t *testing.T) {
		s.get(t, "/c/nothing").expect(t, http.StatusNotFound, "There is no candidate &#34;nothing&#34;")
		s.get(t, "/c/..%2F..%2Fetc%2Fpasswd").expect(t, http.StatusNotFound)
		s.get(t, "/c/notify-checks/sends/1").expect(t, http.StatusNotFound, "Sends are kept only while the console runs")
		s.get(t, "/c/notify-checks/sends/x/events").expect(t, http.StatusNotFound)
		s.get(t, "/elsewhere").expect(t, http.StatusNotFound)
		s.post(t, "/c/nothing/send", approveForm("ada")).expect(t, http.StatusNotFound)
	})
	t.Run("wrong method", func(t *testing.T) {
		// A GET never sends; the address is not a page.
		s.get(t, "/c/notify-checks/send").expect(t, http.StatusNotFound)
	})
	t.Run("a name is required", func(t *testing.T) {
		p := s.post(t, "/c/notify-checks/send", approveForm("  "))
		p.expect(t, http.StatusBadRequest, `aria-invalid="true"`, `<p class="notice bad" id="form-error" role="alert">enter your name`)
		s.post(t, "/c/notify-checks/send", approveForm("ada\x01")).expect(t, http.StatusUnprocessableEntity, "the name must be at most 256 bytes of text")
	})
	t.Run("a file changed while reviewing", func(t *testing.T) {
		f := approveForm("ada")
		f.Set("request_digest", "sha256:"+strings.Repeat("0", 64))
		p := s.post(t, "/c/notify-checks/send", f)
		p.expect(t, http.StatusConflict, "the request changed on disk while you were reviewing it; nothing was approved")
		s.get(t, "/c/notify-checks").expect(t, http.StatusOK, "Approve and send")
	})
	t.Run("forms from another site are refused", func(t *testing.T) {
		p := s.do(t, http.MethodPost, "/c/notify-checks/send", approveForm("ada"), http.Header{"Sec-Fetch-Site": {"cross-site"}})
		p.expect(t, http.StatusForbidden, "This form was sent from another site")
		p = s.do(t, http.MethodPost, "/c/notify-checks/send", approveForm("ada"), http.Header{"Origin": {"http://evil.example"}})
		p.expect(t, http.StatusForbidden)
	})
	t.Run("forms whose Referer is another site are refused", func(t *testing.T) {
		p := s.do(t, http.MethodPost, "/c/notify-checks/send", approveForm("ada"), http.Header{"Referer": {"http://evil.example/page"}})
		p.expect(t, http.StatusForbidden, "This form was sent from another site")
	})
	if n := env.Counts().RequestsReceived; n != 0 {
		t.Errorf("the task service received %d requests, want 0", n)
	}
}

// TestHostAllowlist: a request naming a host the console was not started
// with is refused, whatever the listen address; the allowed names pass.
func TestHostAllowlist(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) {
		c.AllowedHosts = append(c.AllowedHosts, "console.example")
	})
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1", "localhost", "10.0.0.1:" + port} {
		for _, path := range []string{"/", "/c/notify-checks", "/static/console.css", s.Console.LoginPath()} {
			p := s.do(t, http.MethodGet, path, nil, http.Header{"Host": {host}})
			p.expect(t, http.StatusMisdirectedRequest, "This console answers only to the host names it was started with")
			p.lacks(t, s.Dir, env.URL(), "notify-checks")
			if p.header.Get("Set-Cookie") != "" {
				t.Errorf("Host %s, %s: a cookie was set", host, path)
			}
		}
		p := s.do(t, http.MethodPost, "/c/notify-checks/send", approveForm("ada"), http.Header{"Host": {host}})
		p.expect(t, http.StatusMisdirectedRequest)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "console.example", "CONSOLE.example:443"} {
		s.do(t, http.MethodGet, "/", nil, http.Header{"Host": {host}}).expect(t, http.StatusOK, "notify-checks")
	}
	if n := env.Counts().RequestsReceived; n != 0 {
		t.Errorf("the task service received %d requests, want 0", n)
	}
}

// TestSessionRequired: without the cookie that the start address sets,
// every page, document, event stream and form post is refused with a page
// that says what to open; the start address sets an HttpOnly, SameSite=Strict
// cookie and redirects to the page without the token.
func TestSessionRequired(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := startConsole(t, env, copyFixtures(t), nil)
	anon := s.anonymous()
	for _, path := range []string{"/", "/c/notify-checks", "/c/notify-checks/candidate.json", "/c/notify-checks/sends/1/events", "/elsewhere"} {
		p := anon.get(t, path)
		p.expect(t, http.StatusUnauthorized, "Open the address the console printed when it started")
		p.lacks(t, s.Dir, env.URL(), "cand-0001", "notify-checks")
	}
	anon.post(t, "/c/notify-checks/send", approveForm("ada")).expect(t, http.StatusUnauthorized)
	anon.post(t, "/c/notify-checks/discard", url.Values{}).expect(t, http.StatusUnauthorized)
	// The stylesheet and script reveal nothing; the sign-in page uses them.
	anon.get(t, "/static/console.css").expect(t, http.StatusOK)

	// A wrong token, or a cookie with another value, lets nobody in.
	wrong := strings.Replace(s.Console.LoginPath(), "token=", "token=0", 1)
	p := anon.get(t, wrong)
	p.expect(t, http.StatusUnauthorized, "token is not this console")
	if p.header.Get("Set-Cookie") != "" {
		t.Error("a wrong token set a cookie")
	}
	anon.get(t, "/?token=").expect(t, http.StatusUnauthorized)
	u, _ := url.Parse(s.URL)
	for _, ck := range s.Jar.Cookies(u) {
		forged := anon.do(t, http.MethodGet, "/", nil, http.Header{"Cookie": {ck.Name + "=" + strings.Repeat("0", len(ck.Value))}})
		forged.expect(t, http.StatusUnauthorized)
	}
	if n := env.Counts().RequestsReceived; n != 0 {
		t.Errorf("the task service received %d requests, want 0", n)
	}

	// The start address: a cookie, and a redirect that drops the token
	// and keeps the rest of the address.
	p = anon.get(t, strings.Replace(s.Console.LoginPath(), "/?", "/c/notify-checks?x=1&", 1))
	if p.status != http.StatusSeeOther || p.location != "/c/notify-checks?x=1" {
		t.Fatalf("the start address: status %d, Location %q", p.status, p.location)
	}
	resp := http.Response{Header: p.header}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("the start address set %d cookies", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge != 0 || !ck.Expires.IsZero() {
		t.Errorf("the session cookie %s: want HttpOnly, SameSite=Strict, Path=/, for the browser session", p.header.Get("Set-Cookie"))
	}
	if strings.Contains(ck.Value, strings.TrimPrefix(s.Console.LoginPath(), "/?token=")) {
		t.Error("the cookie holds the token")
	}
	in := anon.do(t, http.MethodGet, "/", nil, http.Header{"Cookie": {ck.Name + "=" + ck.Value}})
	in.expect(t, http.StatusOK, "notify-checks")

	// With the cookie, posts and event streams work.
	path := press(t, s, approveForm("reviewer-1"))
	s.get(t, path+"/events").expect(t, http.StatusOK, "event: result")
}

var sendLocation = regexp.MustCompile(`^/c/notify-checks/sends/([0-9]+)#result$`)

// press posts the form and returns the send page's path.
func press(t *testing.T, s *server, form url.Values) string {
	t.Helper()
	p := s.post(t, "/c/notify-checks/send", form)
	if p.status != http.StatusSeeOther || !sendLocation.MatchString(p.location) {
		t.Fatalf("pressing: status %d, Location %q\n%s", p.status, p.location, p.body)
	}
	return strings.TrimSuffix(p.location, "#result")
}

// TestApproveTwiceWithoutJavaScript: the whole story with plain form posts
// and redirects, as a browser without JavaScript sees it.
func TestApproveTwiceWithoutJavaScript(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := startConsole(t, env, copyFixtures(t), nil)

	first := press(t, s, approveForm("reviewer-1"))
	p := s.get(t, first+"?wait=1")
	p.expect(t, http.StatusOK,
		`data-state="created"`,
		`<strong>created: task <code class="task">fake-task-0001</code></strong>`,
		`<td class="requests_received">1</td><td class="creates_executed">1</td><td class="tasks_existing">1</td>`,
		"Approved by <strong>reviewer-1</strong>",
		`<button type="submit" id="send" aria-describedby="send-hint">Send again</button>`,
		"executor <code>exec-1</code>",
	)
	p.lacks(t, "<noscript><meta") // the receipt is there: no refresh

	// Pressing again publishes again, as a new message.
	second := press(t, s, url.Values{})
	if second == first {
		t.Fatalf("the second press went to the first send's page %s", first)
	}
	p = s.get(t, second+"?wait=1")
	p.expect(t, http.StatusOK,
		`data-state="replayed"`,
		`<strong>replayed: the same task <code class="task">fake-task-0001</code></strong>`,
		`<td class="requests_received">2</td><td class="creates_executed">1</td><td class="tasks_existing">1</td>`,
		`<td class="counts">2, 1, 1</td>`,
		`<td class="counts">1, 1, 1</td>`,
	)
	if got := strings.Count(p.body, `<code class="task">fake-task-0001</code>`); got < 3 {
		t.Errorf("the task id appears %d times, want the result and both rows", got)
	}
	if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Fatalf("the task service counts %+v, want 2, 1, 1", c)
	}
	// Reloading shows the same send and sends nothing.
	s.get(t, second).expect(t, http.StatusOK, `data-state="replayed"`)
	s.get(t, "/").expect(t, http.StatusOK, "Approved in this console", `<span class="tag replayed">replayed</span>`)
	if c := env.Counts(); c.RequestsReceived != 2 {
		t.Fatalf("reloading sent again: %+v", c)
	}
	approval := s.get(t, "/c/notify-checks/approval.json")
	approval.expect(t, http.StatusOK, `"approved_by": "reviewer-1"`, `"digest": "`+seedCandidateDigest+`"`)

	// The events of a send that has its receipt: the row, then the result.
	ev := s.get(t, second+"/events")
	ev.expect(t, http.StatusOK, "event: row\ndata: ", "event: result\ndata: ", `data-outcome="replayed"`)
	if ct := ev.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if strings.Index(ev.body, "event: row") > strings.Index(ev.body, "event: result") {
		t.Error("the result event came before the row event")
	}

	// The candidate changes on disk after the approval.
	editJSON(t, filepath.Join(s.Dir, "notify-checks"+console.CandidateSuffix), func(m map[string]any) {
		m["summary"] = "有人在會議中說會把通知設定整個重寫"
	})
	s.get(t, "/c/notify-checks").expect(t, http.StatusOK,
		`<div class="notice warn" id="changed" role="note">`, "The candidate changed after it was approved.")
	third := press(t, s, url.Values{})
	p = s.get(t, third+"?wait=1")
	p.expect(t, http.StatusOK,
		`data-state="refused"`,
		`<strong>rejected at candidate_binding:</strong> the candidate changed after it was approved.`,
		"<strong>Nothing was sent.</strong>",
		`<td><code class="digest">`+seedCandidateDigest+`</code></td>`,
		"<strong>differs</strong>",
		"The gate's words: check <code>candidate_binding</code> at <code>$.candidate</code>",
		`<span class="tag refused">not sent: rejected at candidate_binding</span>`,
		`<button type="submit" class="secondary" id="discard">`,
	)
	if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Fatalf("after the refused send the task service counts %+v, want 2, 1, 1", c)
	}

	// Discarding the approval: the changed candidate no longer matches the
	// request, so it cannot be approved again as it is.
	d := s.post(t, "/c/notify-checks/discard", url.Values{})
	if d.status != http.StatusSeeOther || d.location != "/c/notify-checks" {
		t.Fatalf("discard: status %d, Location %q", d.status, d.location)
	}
	p = s.get(t, "/c/notify-checks")
	p.expect(t, http.StatusOK, "The request does not match the candidate:", "the candidate changed after the request was made",
		`<span class="tag refused">`)
	p.lacks(t, "Approve and send", "Send again")
}

// gateRequiringSignatures is an executor's gate without trusted keys: it
// refuses every unsigned approval.
var gateRequiringSignatures = gate.Checker{}

// TestExecutorRejection: a refusal by the executor's gate (here: the
// executor refuses unsigned approvals) is shown in plain words too.
func TestExecutorRejection(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", Gate: &gateRequiringSignatures})
	s := startConsole(t, env, copyFixtures(t), nil)
	p := s.get(t, press(t, s, approveForm("reviewer-1"))+"?wait=1")
	p.expect(t, http.StatusOK, `data-state="rejected"`,
		`<strong>rejected at signature:</strong> the approval&#39;s signature is missing or does not verify.`,
		"The executor's gate refused the message, so the task service was not called")
	if c := env.Counts(); c.RequestsReceived != 0 {
		t.Fatalf("the task service was called: %+v", c)
	}
}

// TestNoReceipt: without an executor, the send's page says it is waiting
// (with the refresh for browsers without JavaScript and the event stream for
// those with it), and then that no receipt came in time.
func TestNoReceipt(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.Wait = 500 * time.Millisecond })
	path := press(t, s, approveForm("reviewer-1"))
	p := s.get(t, path)
	p.expect(t, http.StatusOK, `data-state="pending"`, "waiting for the receipt",
		`<noscript><meta http-equiv="refresh" content="0; url=`+path+`?wait=1#result"></noscript>`,
		`data-events="`+path+`/events"`, `aria-busy="true"`)
	p = s.get(t, path+"?wait=1")
	p.expect(t, http.StatusOK, `data-state="no-receipt"`, "<strong>No receipt yet:</strong> no receipt within 500ms.", "Sending again is safe.")
	p.lacks(t, "<noscript><meta")

	// The event stream ends with the same result.
	ev := s.get(t, path+"/events")
	ev.expect(t, http.StatusOK, "event: result", `data-outcome="no-receipt"`)
}

// TestEventStreamWaits: an event stream opened before the receipt exists
// delivers it when the executor stores it.
func TestEventStreamWaits(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), nil)
	path := press(t, s, approveForm("reviewer-1"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path+"/events", nil)
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !lines.Scan() || lines.Text() != "retry: 2000" {
		t.Fatalf("the stream starts with %q", lines.Text())
	}
	env.Executor(executor.Config{ID: "exec-1"}) // only now can a receipt come
	var got []string
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "event: ") {
			got = append(got, l)
		} else if strings.Contains(l, `data-outcome="created"`) {
			got = append(got, "created")
		}
	}
	if want := "event: row,event: result,created"; strings.Join(got, ",") != want {
		t.Fatalf("events %q, want %s", got, want)
	}
}

func TestNewRefusesAMissingFolder(t *testing.T) {
	env := testenv.Start(t)
	_, err := console.New(console.Config{Dir: filepath.Join(t.TempDir(), "nope"), JetStream: env.JS})
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("New on a missing folder: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// TestNotSent: a send that cannot be published says so, and why.
func TestNotSent(t *testing.T) {
	env := testenv.Start(t)
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.PublishTimeout = 2 * time.Second })

	// No APPROVALS stream: publishing fails.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, "APPROVALS"); err != nil {
		t.Fatal(err)
	}
	p := s.get(t, press(t, s, approveForm("reviewer-1")))
	p.expect(t, http.StatusOK, `data-state="failed"`, "<strong>Not sent:</strong> send: not acknowledged by the stream: storing the approval on APPROVALS",
		"Is NATS reachable and an executor running", `<span class="tag failed">not sent</span>`)

	// The candidate file is gone: nothing can be sent with the kept approval.
	if err := os.Remove(filepath.Join(s.Dir, "notify-checks"+console.CandidateSuffix)); err != nil {
		t.Fatal(err)
	}
	p = s.get(t, press(t, s, url.Values{}))
	p.expect(t, http.StatusOK, `data-state="failed"`, "<strong>Not sent:</strong> notify-checks.candidate.json is missing",
		"Nothing was published.")
	p.lacks(t, "Is NATS reachable")
}

// TestConcurrentPresses: presses at the same time (a double click, two
// tabs) make one approval and one send each; one creates, the rest replay.
func TestConcurrentPresses(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := startConsole(t, env, copyFixtures(t), nil)
	const n = 4
	var wg sync.WaitGroup
	locations := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, err := s.HTTPClient().PostForm(s.URL+"/c/notify-checks/send", approveForm("reviewer-1"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			locations[i] = resp.Header.Get("Location")
			if r, err := s.HTTPClient().Get(s.URL + "/"); err == nil {
				r.Body.Close()
			}
		})
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, loc := range locations {
		if !sendLocation.MatchString(loc) {
			t.Fatalf("a press was redirected to %q", loc)
		}
		p := s.get(t, strings.TrimSuffix(loc, "#result")+"?wait=1")
		m := regexp.MustCompile(`data-state="([a-z_]+)"`).FindStringSubmatch(p.body)
		if m == nil || !strings.Contains(p.body, `<code class="task">fake-task-0001</code>`) {
			t.Fatalf("send %s:\n%s", loc, p.body)
		}
		outcomes[m[1]]++
	}
	if outcomes["created"] != 1 || outcomes["replayed"] != n-1 {
		t.Errorf("outcomes %v, want one created and %d replayed", outcomes, n-1)
	}
	if c := env.Counts(); c.RequestsReceived != n || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("the task service counts %+v, want %d, 1, 1", c, n)
	}
}

// A console connected as a publisher that may create no consumer shows the
// receipt of each send: created, then replayed; the server refused it
// nothing.
func TestAConsoleThatMayCreateNoConsumerShowsItsReceipts(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	env.Executor(executor.Config{ID: "exec-1"})
	js, violations := env.ConnectPublisher()
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.JetStream = js })
	first := press(t, s, approveForm("reviewer-1"))
	s.get(t, first+"?wait=1").expect(t, http.StatusOK, `data-state="created"`)
	second := press(t, s, url.Values{})
	s.get(t, second+"?wait=1").expect(t, http.StatusOK, `data-state="replayed"`)
	if v := violations.Seen(); len(v) > 0 {
		t.Errorf("the server refused the console: %v", v)
	}
}

func TestReviewShowsTheRequestsDestination(t *testing.T) {
	env := testenv.Start(t)
	dir := copyFixtures(t)
	editJSON(t, filepath.Join(dir, "release-notes.request.json"), func(m map[string]any) {
		m["provider"], m["destination"] = document.ProviderCalDAV, "team"
	})
	s := startConsole(t, env, dir, nil)
	for _, c := range []struct{ name, path, want string }{
		{"a request naming no destination shows its provider's default one", "/c/notify-checks",
			`<dd id="destination">provider <code class="provider">fake-task-provider.v1</code>, destination <code class="destination">default</code> <span class="hint">the request names no destination`},
		{"a request for a CalDAV calendar named team shows the provider and the name", "/c/release-notes",
			`<dd id="destination">provider <code class="provider">caldav-task.v1</code>, destination <code class="destination">team</code> <span class="hint">where the task is made`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.get(t, c.path).expect(t, http.StatusOK, c.want)
		})
	}
}
