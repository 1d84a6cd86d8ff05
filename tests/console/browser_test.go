package console_test

import (
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/consoletest"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write docs/console.png (shown in docs/CONSOLE.md) from the browser test, and docs/tracing-resend.png (docs/TRACING.md) from the Jaeger test")

// chromiumPath is Debian's chromium package, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// The screenshot docs/CONSOLE.md shows.
const readmeScreenshot = "../../docs/console.png"

// browser starts a headless Chromium for the test and returns its tab. It
// skips the test when Chromium is not installed, except in CI (CI=true),
// where that is a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the browser test needs %s (Debian's chromium package; .ci/run installs it): %v", chromiumPath, err)
		}
		t.Skipf("skipping the browser test: %s is not installed (apt-get install chromium); with CI=true this fails instead", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// rebind.test resolves to this machine, as a rebound DNS name
		// would: the console must refuse it by its Host header.
		chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	// The first action starts the browser; it must not run under a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// tab runs browser steps with a timeout each.
type tab struct {
	t     *testing.T
	ctx   context.Context
	shots string
	n     int
}

func newTab(t *testing.T, ctx context.Context) *tab {
	dir := os.Getenv("SENDTWICE_ARTIFACTS")
	if dir != "" {
		dir = filepath.Join(dir, "console", t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		dir = t.ArtifactDir()
	}
	t.Logf("screenshots in %s", dir)
	return &tab{t: t, ctx: ctx, shots: dir}
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// text returns the visible text of the first element the selector finds.
func (b *tab) text(sel string) string {
	b.t.Helper()
	return strings.Join(strings.Fields(run(b, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))), " ")
}

// expectText checks that the first element the selector finds shows want;
// what says which check it is.
func (b *tab) expectText(what, sel, want string) {
	b.t.Helper()
	if got := b.text(sel); got != want {
		b.t.Errorf("%s: %s shows %q, want %q", what, sel, got, want)
	}
}

// screenshot saves the whole page as NN-name.png and returns its path.
func (b *tab) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	b.n++
	path := filepath.Join(b.shots, strings.Join([]string{twoDigits(b.n), name}, "-")+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// updateDocScreenshot copies the screenshot shot to doc, a picture the
// documents show, when the test runs with -update-screenshot.
func updateDocScreenshot(t *testing.T, shot, doc string) {
	t.Helper()
	if !*updateScreenshot {
		return
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", doc)
}

func twoDigits(n int) string { return string([]byte{byte('0' + n/10%10), byte('0' + n%10)}) }

func expectCounts(t *testing.T, env *testenv.Env, want provider.Counts) {
	t.Helper()
	if got := env.Counts(); got != want {
		t.Fatalf("the task service counts %+v, want %+v", got, want)
	}
}

// TestBrowserApproveTwice: in Chromium, open a candidate, press Approve (the
// receipt arrives live), press again (replayed, the same task, 2, 1, 1),
// reload, then change the candidate on disk and see the gate refuse it.
func TestBrowserApproveTwice(t *testing.T) {
	ctx := browser(t)
	env := testenv.Start(t)
	s := consoletest.Start(t, env, consoletest.CopyFixtures(t), nil, nil)
	b := newTab(t, ctx)

	b.do("opening the list", chromedp.Navigate(s.URL+s.Console.LoginPath()), chromedp.WaitVisible(chromedp.CSS(`a[href="/c/notify-checks"]`)))
	b.screenshot("list")
	b.do("opening the candidate", chromedp.Click(chromedp.CSS(`a[href="/c/notify-checks"]`)), chromedp.WaitVisible(chromedp.ID("send")))
	if got := b.text("#assignee .unknown") + ", " + b.text("#due .unknown"); got != "unknown, unknown" {
		t.Errorf("assignee and due date show %q, want unknown, unknown", got)
	}
	b.expectText("candidate digest", "#candidate-digest", consoletest.SeedCandidateDigest)
	b.expectText("request digest", "#request-digest", consoletest.SeedRequestDigest)
	if got := run(b, "reading the name", chromedp.Value(chromedp.ID("by"))); got != "reviewer-1" {
		t.Errorf("the name field holds %q", got)
	}
	// The keyboard reaches the links, the name and the button in reading
	// order.
	var order []string
	for range 7 {
		b.do("pressing Tab", chromedp.KeyEvent("\t"))
		order = append(order, run(b, "reading the focus", chromedp.Evaluate[string](
			`(e => e.id || e.getAttribute('href') || e.tagName)(document.activeElement)`)))
	}
	if got, want := strings.Join(order, " "), "#main / / /c/notify-checks/candidate.json /c/notify-checks/request.json by send"; got != want {
		t.Errorf("focus order %q, want %q", got, want)
	}
	b.screenshot("review")

	// No executor runs yet: the page waits, and the receipt must arrive
	// through the event stream, without a reload.
	b.do("pressing Approve", chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="pending"]`)))
	b.do("marking the page", chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))
	b.screenshot("pending")
	env.Executor(executor.Config{ID: "exec-1"})
	b.do("waiting for the receipt", chromedp.WaitVisible(chromedp.CSS(`#result[data-state="created"]`)))
	if !run(b, "checking for a reload", chromedp.Evaluate[bool](`window.sameDocument === true`)) {
		t.Error("the page was reloaded; the receipt should have come through the event stream")
	}
	b.expectText("after the first press", "#result .outcome", "created: task fake-task-0001")
	b.expectText("the first send's row, updated live", "#send-1 .counts", "1, 1, 1")
	b.screenshot("created")

	b.do("pressing again", chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="replayed"]`)))
	b.expectText("after the second press", "#result .outcome", "replayed: the same task fake-task-0001")
	counts := b.text("#result td.requests_received") + ", " + b.text("#result td.creates_executed") + ", " + b.text("#result td.tasks_existing")
	if counts != "2, 1, 1" {
		t.Errorf("the receipt's counters read %s, want 2, 1, 1", counts)
	}
	for n, want := range map[string]string{"#send-1": "fake-task-0001 1, 1, 1", "#send-2": "fake-task-0001 2, 1, 1"} {
		row := b.text(n+" td:nth-child(5)") + " " + b.text(n+" td:nth-child(6)")
		if row != want {
			t.Errorf("row %s: %q, want %q", n, row, want)
		}
	}
	shot := b.screenshot("replayed")
	expectCounts(t, env, provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1})
	updateDocScreenshot(t, shot, readmeScreenshot)

	// Reloading shows the same send again and sends nothing.
	b.do("reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="replayed"]`)))
	expectCounts(t, env, provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1})

	// The candidate changes on disk after the approval.
	consoletest.EditJSON(t, filepath.Join(s.Dir, "notify-checks"+console.CandidateSuffix), func(m map[string]any) {
		m["summary"] = "有人在會議中說會把通知設定整個重寫"
	})
	b.do("reviewing again", chromedp.Navigate(s.URL+"/c/notify-checks"), chromedp.WaitVisible(chromedp.ID("changed")))
	b.screenshot("changed")
	b.do("pressing send again", chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="refused"]`)))
	b.expectText("the changed candidate", "#result .outcome", "rejected at candidate_binding: the candidate changed after it was approved.")
	if got := b.text("#result .outcome + p"); !strings.HasPrefix(got, "Nothing was sent.") {
		t.Errorf("the refusal says %q", got)
	}
	b.screenshot("rejected")
	expectCounts(t, env, provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1})
}

// TestBrowserWithoutJavaScript: with scripts off, approving still shows the
// receipt (the page refreshes to a variant that waits on the server), and
// pressing again shows replayed.
func TestBrowserWithoutJavaScript(t *testing.T) {
	ctx := browser(t)
	env := testenv.Start(t)
	// waiting is told when the browser asks for the page that waits for a
	// receipt on the server.
	waiting := make(chan struct{}, 1)
	s := consoletest.Start(t, env, consoletest.CopyFixtures(t), nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("wait") {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	b := newTab(t, ctx)
	b.do("turning scripts off", chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tt, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	b.do("opening the list", chromedp.Navigate(s.URL+s.Console.LoginPath()), chromedp.Click(chromedp.CSS(`a[href="/c/release-notes"]`)),
		chromedp.WaitVisible(chromedp.ID("send")))
	// No executor runs yet: the page says it waits, and refreshes to the
	// variant that waits on the server.
	b.do("pressing Approve", chromedp.Click(chromedp.ID("send")))
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		b.screenshot("no-refresh")
		t.Fatal("the browser did not follow the page's refresh to the waiting variant")
	}
	env.Executor(executor.Config{ID: "exec-1"})
	b.do("waiting for the receipt", chromedp.WaitVisible(chromedp.CSS(`#result[data-state="created"]`)))
	if loc := run(b, "reading the address", chromedp.Location()); !strings.Contains(loc, "?wait=1") {
		t.Errorf("the receipt page is %s; without scripts it should be the waiting variant (?wait=1)", loc)
	}
	b.expectText("after the first press", "#result .outcome", "created: task fake-task-0001")
	b.do("pressing again", chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="replayed"]`)))
	b.expectText("after the second press", "#result .outcome", "replayed: the same task fake-task-0001")
	b.expectText("the second send's counters", "#send-2 .counts", "2, 1, 1")
	b.screenshot("replayed-without-javascript")
	expectCounts(t, env, provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1})
}

// TestBrowserSignInAndHosts: in Chromium, the console refuses a browser
// that has not opened the address printed at start, and a page that reaches
// it under another host name (a DNS name rebound to this machine); opening
// the printed address lets the browser in, drops the token from the
// address bar, and approving works.
func TestBrowserSignInAndHosts(t *testing.T) {
	ctx := browser(t)
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := consoletest.Start(t, env, consoletest.CopyFixtures(t), nil, nil)
	b := newTab(t, ctx)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())

	// Without the cookie: a page that says what to open, and nothing else.
	b.do("opening the list without the cookie", chromedp.Navigate(s.URL+"/c/notify-checks"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	b.expectText("without the cookie", "main h1", "Open the console's address")
	if got := b.text("main .notice"); !strings.Contains(got, "Open the address the console printed when it started") {
		t.Errorf("without the cookie: %q", got)
	}
	if n := run(b, "looking for the form", chromedp.Evaluate[int](`document.querySelectorAll('form, #send').length`)); n != 0 {
		t.Errorf("the refused page has %d forms", n)
	}
	b.screenshot("no-cookie")
	// A form post without the cookie, from a page of the console's own
	// origin, is refused too.
	status := run(b, "posting without the cookie", chromedp.Evaluate[int](`fetch('/c/notify-checks/send', {method: 'POST',
		headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'by=mallory'}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != http.StatusUnauthorized {
		t.Errorf("a post without the cookie: status %d, want 401", status)
	}

	// The printed address lets the browser in and leaves no token behind.
	b.do("opening the printed address", chromedp.Navigate(s.URL+s.Console.LoginPath()), chromedp.WaitVisible(chromedp.CSS(`a[href="/c/notify-checks"]`)))
	if loc := run(b, "reading the address", chromedp.Location()); loc != s.URL+"/" {
		t.Errorf("after the printed address the browser shows %s, want %s/", loc, s.URL)
	}
	if c := run(b, "reading document.cookie", chromedp.Evaluate[string](`document.cookie`)); c != "" {
		t.Errorf("scripts can read the session cookie: %q", c)
	}

	// A rebound host name reaches the same server, and is refused: with
	// the cookie in this browser, and whatever the page does.
	rebound := "http://rebind.test:" + port
	b.do("opening the console under another name", chromedp.Navigate(rebound+"/"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	b.expectText("under another host name", "main h1", "Wrong address")
	if got := b.text("main .notice"); !strings.Contains(got, "rebind.test") {
		t.Errorf("the refusal does not name the host: %q", got)
	}
	b.screenshot("foreign-host")
	status = run(b, "posting under another name", chromedp.Evaluate[int](`fetch('/c/notify-checks/send', {method: 'POST',
		headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'by=mallory'}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != http.StatusMisdirectedRequest {
		t.Errorf("a post under another host name: status %d, want 421", status)
	}
	expectCounts(t, env, provider.Counts{})

	// The normal flow, signed in.
	b.do("opening the candidate", chromedp.Navigate(s.URL+"/c/notify-checks"), chromedp.WaitVisible(chromedp.ID("send")))
	b.do("pressing Approve", chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.CSS(`#result[data-state="created"]`)))
	b.screenshot("created")
	expectCounts(t, env, provider.Counts{RequestsReceived: 1, CreatesExecuted: 1, TasksExisting: 1})
}
