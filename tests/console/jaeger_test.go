package console_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sendtwice/sendtwice/internal/jaegertest"
)

// The screenshot docs/TRACING.md shows.
const tracingScreenshot = "../../docs/tracing-resend.png"

// demoResendTrace runs executor demo (built from the workspace) with its
// spans sent to j, and returns the trace of its step 2: the same approval
// sent again from a second publisher process, answered replayed.
func demoResendTrace(t *testing.T, j *jaegertest.Jaeger) jaegertest.Trace {
	t.Helper()
	bin := t.TempDir() + "/"
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sendtwice/sendtwice/cmd/executor").CombinedOutput(); err != nil {
		t.Fatalf("building the executor: %v\n%s", err, out)
	}
	cmd := exec.Command(bin+"executor", "demo")
	cmd.Env = append(os.Environ(), j.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("executor demo: %v\n%s", err, out)
	}
	// Steps 2 and 4 are replayed, step 2 alone from a publisher process.
	fromPublisher := func(tr jaegertest.Trace) bool { return slices.Contains(tr.Services(), "sendtwice-publisher") }
	traces := j.WaitTraces(t, "sendtwice-executor", map[string]string{"sendtwice.outcome": "replayed"},
		func(trs []jaegertest.Trace) bool { return slices.ContainsFunc(trs, fromPublisher) })
	traces = slices.DeleteFunc(traces, func(tr jaegertest.Trace) bool { return !fromPublisher(tr) })
	start := func(tr jaegertest.Trace) int64 {
		return slices.MinFunc(tr.Spans, func(a, b jaegertest.Span) int { return int(a.StartTime - b.StartTime) }).StartTime
	}
	return slices.MinFunc(traces, func(a, b jaegertest.Trace) int { return int(start(a) - start(b)) })
}

// TestJaegerShowsTheDemosResendAsOneTraceAcrossTwoServices: with the demo's
// spans in a real Jaeger, its UI shows the trace of the resend (step 2),
// with the publisher's and the executor's services and the delivery whose
// outcome is replayed; -update-screenshot writes docs/tracing-resend.png.
func TestJaegerShowsTheDemosResendAsOneTraceAcrossTwoServices(t *testing.T) {
	j := jaegertest.Start(t)
	if has, err := j.HasUI(); err != nil || !has {
		msg := "Jaeger serves no UI: a binary built from the Go module holds none of jaeger-ui's assets; set $" +
			jaegertest.UIAssetsEnv + " to a directory of jaeger-ui's build to see it"
		if *updateScreenshot {
			t.Fatalf("cannot write %s: %s (%v)", tracingScreenshot, msg, err)
		}
		t.Skipf("skipping: %s (%v)", msg, err)
	}
	ctx := browser(t)
	tr := demoResendTrace(t, j)
	b := newTab(t, ctx)
	b.do("opening the resend's trace", chromedp.Navigate(j.TraceURL(tr.TraceID)))
	shows := func(words ...string) bool {
		text := run(b, "reading the page", chromedp.Evaluate[string](`document.body.innerText`))
		return !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(text, w) })
	}
	waitShows := func(what string, words ...string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !shows(words...); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
				t.Fatalf("the trace's page does not show %q (%s) after 30 s", words, what)
			}
		}
	}
	waitShows("the trace", "sendtwice-publisher", "sendtwice-executor", "process APPROVALS")
	// Open the delivery's details: its tags show the outcome.
	opened := run(b, "opening the delivery's details", chromedp.Evaluate[bool](`(() => {
		const name = [...document.querySelectorAll('*')].find(e => e.children.length === 0 && e.textContent.trim() === 'process APPROVALS');
		if (!name) return false;
		(name.closest('a, button, [role=switch]') || name).click();
		return true;
	})()`))
	if !opened {
		t.Fatal("the page has no span named process APPROVALS to open")
	}
	waitShows("the delivery's details", "sendtwice.outcome", "replayed")
	updateDocScreenshot(t, b.screenshot("resend-trace"), tracingScreenshot)
}
