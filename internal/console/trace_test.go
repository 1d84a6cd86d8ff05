package console_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
)

const jaegerTemplate = "http://127.0.0.1:16686/trace/{trace_id}"

// The reviewer's press starts the trace with a span console approve, the
// parent of the publish's; the send's page and row link to that trace by
// the template, and a press the gate refuses is a failed span that names
// the check, linked too.
func TestAPressStartsTheTraceThePublishContinuesAndThePageLinksIt(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	rec := tracingtest.Record(t)
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.TraceURL = jaegerTemplate })

	first := press(t, s, approveForm("reviewer-1"))
	approves := tracingtest.Named(rec, "console approve")
	sends := tracingtest.Named(rec, "send approvals.default.intent-0001")
	if len(approves) != 1 || len(sends) != 1 {
		t.Fatalf("%d console approve and %d send spans, want one each", len(approves), len(sends))
	}
	approve, sent := approves[0], sends[0]
	if approve.SpanKind() != trace.SpanKindServer || approve.Parent().IsValid() {
		t.Errorf("console approve is of kind %v with parent %v; want a server span that starts the trace", approve.SpanKind(), approve.Parent())
	}
	if sent.Parent().SpanID() != approve.SpanContext().SpanID() || sent.SpanContext().TraceID() != approve.SpanContext().TraceID() {
		t.Errorf("the send span's parent is %v, want console approve %v", sent.Parent(), approve.SpanContext())
	}
	if got := tracingtest.Attributes(approve); got[tracing.IntentID] != "intent-0001" || got[tracing.Scope] != "default" || got[tracing.Destination] != "default" {
		t.Errorf("console approve's attributes %v, want the request's intent, scope and destination", got)
	}
	traceID := approve.SpanContext().TraceID().String()
	link := `href="http://127.0.0.1:16686/trace/` + traceID + `"`
	p := s.get(t, first+"?wait=1")
	p.expect(t, http.StatusOK, `data-state="created"`, `<p class="trace">Its trace: <a `+link)
	if n := strings.Count(p.body, link); n != 2 {
		t.Errorf("the page links the trace %d times, want the result and the send's row", n)
	}

	// The request changes on disk: the next press is refused by the gate.
	editJSON(t, filepath.Join(s.Dir, "notify-checks"+console.RequestSuffix), func(m map[string]any) { m["request_id"] = "task-request-0999" })
	second := press(t, s, url.Values{})
	approves = tracingtest.Named(rec, "console approve")
	if len(approves) != 2 || len(tracingtest.Named(rec, "send approvals.default.intent-0001")) != 1 {
		t.Fatalf("after a refused press: %d console approve spans, want 2, and no new send span", len(approves))
	}
	refused := approves[1]
	if refused.Status().Code != codes.Error || tracingtest.Attributes(refused)[tracing.Check] != "request_binding" {
		t.Errorf("the refused press's span has status %v and attributes %v; want an error naming request_binding", refused.Status(), refused.Attributes())
	}
	s.get(t, second).expect(t, http.StatusOK, `data-state="refused"`,
		`href="http://127.0.0.1:16686/trace/`+refused.SpanContext().TraceID().String()+`"`)
}

// A send links to no trace without a template, and none with a template
// when tracing is off.
func TestASendLinksToNoTraceWithoutATemplateOrATrace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		traced   bool
		template string
	}{
		{"traced, without --trace-url", true, ""},
		{"with --trace-url, tracing off", false, jaegerTemplate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			if tc.traced {
				tracingtest.Record(t)
			}
			s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.TraceURL = tc.template })
			p := s.get(t, press(t, s, approveForm("reviewer-1")))
			p.expect(t, http.StatusOK, "Published as stream message")
			p.lacks(t, "Its trace", `class="trace"`, "16686")
		})
	}
}

// A trace URL template that does not make an http(s) address with the
// trace id in it is refused, saying why.
func TestATraceURLTemplateMustBeAnHTTPAddressWithTheTraceID(t *testing.T) {
	env := testenv.Start(t)
	for _, tc := range []struct{ template, want string }{
		{"http://127.0.0.1:16686/trace/", "no {trace_id} in it"},
		{"ftp://jaeger/trace/{trace_id}", "not an http or https URL"},
		{"/trace/{trace_id}", "not an http or https URL"},
		{"http:///trace/{trace_id}", "no host in it"},
		{"http://admin:secret@jaeger/trace/{trace_id}", "a user name or password in it"},
		{"http://jaeger/trace/{trace_id}%zz", "invalid URL escape"},
		{jaegerTemplate, ""},
		{"https://grafana.example/explore?left=%7B%22queries%22:%5B%7B%22query%22:%22{trace_id}%22%7D%5D%7D", ""},
	} {
		c, err := console.New(console.Config{Dir: t.TempDir(), JetStream: env.JS, AllowedHosts: []string{"localhost"}, TraceURL: tc.template})
		if c != nil {
			c.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.template, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "trace URL template")):
			t.Errorf("%s: %v, want a refusal of the trace URL template saying %q", tc.template, err, tc.want)
		}
	}
}
