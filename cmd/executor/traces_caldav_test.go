package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/jaegertest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// caldavTracesPassword is the CalDAV login's password in the traced
// CalDAV send: no span may carry it.
const caldavTracesPassword = "caldav-traces-password-7f3a"

func TestACalDAVSendsTraceHoldsItsHTTPClientSpans(t *testing.T) {
	const user = "alice"
	dav := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: caldavTracesPassword})
	// The executor names its service after OTEL_SERVICE_NAME and adds
	// OTEL_RESOURCE_ATTRIBUTES; the publisher, started with both empty,
	// keeps its own name.
	t.Setenv("OTEL_SERVICE_NAME", "sendtwice-executor-caldav")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=traces-test")
	t.Setenv("CALDAV_PASSWORD", caldavTracesPassword)
	p := startTracedPipeline(t, "--task-service", "caldav", "--caldav-url", dav.CollectionURL, "--caldav-user", user)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	s := testenv.SeedFor(t, scenario.CalDAV)

	created := p.send(t, s.Original.Envelope())
	if created.exit != 0 || created.receipt["outcome"] != document.OutcomeCreated {
		t.Fatalf("the CalDAV send: exit %d, receipt %v:\n%s", created.exit, created.receipt, created.output)
	}
	tr := p.jaeger.WaitTrace(t, expectNamedTrace(t, created), holdsDeliveries(1))
	if got, want := tr.Services(), sortedOf(publisherService, "sendtwice-executor-caldav"); !slices.Equal(got, want) {
		t.Errorf("the trace's services %q, want %q", got, want)
	}
	process := onlySpan(t, tr, "sendtwice-executor-caldav", processSpan)
	if !slices.Contains(tr.Processes[process.ProcessID].Tags, jaegertest.KeyValue{Key: "deployment.environment.name", Type: "string", Value: "traces-test"}) {
		t.Errorf("the executor's resource lacks OTEL_RESOURCE_ATTRIBUTES' deployment.environment.name=traces-test: %+v", tr.Processes[process.ProcessID].Tags)
	}
	var methods []string
	for _, sp := range tr.Spans {
		method, ok := sp.Tag("http.request.method")
		if kind, _ := sp.Tag("span.kind"); kind != "client" || !ok {
			continue
		}
		methods = append(methods, method)
		if !tr.Within(sp, process) {
			t.Errorf("the HTTP span %s is not within %s", sp.OperationName, processSpan)
		}
		if u, _ := sp.Tag("url.full"); !strings.HasPrefix(u, dav.BaseURL+"/") {
			t.Errorf("the HTTP span %s has url.full %q, want a URL of the server %s", sp.OperationName, u, dav.BaseURL)
		}
		if code, _ := sp.Tag("http.response.status_code"); code == "" {
			t.Errorf("the HTTP span %s has no response status", sp.OperationName)
		}
	}
	if !slices.Contains(methods, "PUT") {
		t.Errorf("the trace's HTTP client spans are %q, want the create's PUT among them; the %s", methods, tr)
	}
	expectNothingSecret(t, tr)
}
