package caldav_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// traceparents is a transport that keeps the traceparent header of each
// request it carries to the server.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (p *traceparents) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Header.Get("traceparent"))
	p.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// The adapter's requests go through the transport of the client it is
// given, wrapped: each is a client span of the caller's trace, and carries
// that trace to the server.
func TestACalDAVCreateIsHTTPSpansOfTheCallersTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	s := davtest.Start(t, davtest.Radicale, davtest.Options{})
	given := &traceparents{}
	a := adapter(t, s.CollectionURL, caldav.Config{HTTPClient: &http.Client{Transport: given, Timeout: 10 * time.Second}})
	const title = "Renew the lease of the Lyon office"
	ctx, caller := tracing.Tracer().Start(context.Background(), "caller")
	res, err := a.Create(ctx, request("intent-traced", title))
	caller.End()
	if err != nil || res.Outcome != taskservice.Created {
		t.Fatalf("Create: %+v, %v", res, err)
	}
	traceID := caller.SpanContext().TraceID()
	var names []string
	for _, sp := range rec.Ended() {
		for _, kv := range sp.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, title) || (kv.Key == "url.full" && strings.ContainsAny(v, "?#")) {
				t.Errorf("span %q: %s = %q holds the task's title or a URL query", sp.Name(), kv.Key, v)
			}
		}
		if !strings.HasPrefix(sp.Name(), "HTTP ") {
			continue
		}
		names = append(names, sp.Name())
		if sp.SpanContext().TraceID() != traceID || sp.Parent().SpanID() != caller.SpanContext().SpanID() || sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %q: trace %s, parent %s, kind %v; want a client span under the caller %s/%s",
				sp.Name(), sp.SpanContext().TraceID(), sp.Parent().SpanID(), sp.SpanKind(), traceID, caller.SpanContext().SpanID())
		}
		if full := tracingtest.Attributes(sp)["url.full"]; !strings.HasPrefix(full, s.BaseURL+"/") {
			t.Errorf("span %q: url.full %q, want a URL on the server %s", sp.Name(), full, s.BaseURL)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "HTTP PUT") {
		t.Fatalf("HTTP spans %q: want the PUT that created the task among them", names)
	}
	given.mu.Lock()
	defer given.mu.Unlock()
	if len(given.seen) != len(names) {
		t.Fatalf("the given transport carried %d requests, %d HTTP spans ended", len(given.seen), len(names))
	}
	for i, tp := range given.seen {
		if !strings.Contains(tp, traceID.String()) {
			t.Errorf("request %d carried traceparent %q, want one of trace %s", i+1, tp, traceID)
		}
	}
}
