package send_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
	"github.com/sendtwice/sendtwice/send"
)

// stored is the header of the APPROVALS message seq.
func stored(t *testing.T, js jetstream.JetStream, seq uint64) nats.Header {
	t.Helper()
	s, err := js.Stream(t.Context(), topology.ApprovalsStream)
	var m *jetstream.RawStreamMsg
	if err == nil {
		m, err = s.GetMsg(t.Context(), seq)
	}
	if err != nil {
		t.Fatalf("reading APPROVALS message %d: %v", seq, err)
	}
	return m.Header
}

// A publish is a producer span, send <subject>, with the messaging and
// key attributes: a child of the caller's span, or the root of a trace of
// its own. The stored message's traceparent names that span, and Sent
// names its trace.
func TestAPublishIsAProducerSpanWhoseTraceTheMessageCarries(t *testing.T) {
	env := testenv.Start(t)
	for name, withSpan := range map[string]bool{
		"the caller's span is its parent":             true,
		"without the caller's span it starts a trace": false,
	} {
		t.Run(name, func(t *testing.T) {
			rec := tracingtest.Record(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var parent trace.Span
			if withSpan {
				ctx, parent = tracing.Tracer().Start(ctx, "caller")
				defer parent.End()
			}
			sent, err := send.NewClient(env.JS).Publish(ctx, parsed(t))
			if err != nil {
				t.Fatal(err)
			}
			spans := tracingtest.Named(rec, "send approvals.default.intent-0001")
			if len(spans) != 1 {
				t.Fatalf("%d send spans, want 1; ended: %v", len(spans), rec.Ended())
			}
			span := spans[0]
			switch {
			case span.SpanKind() != trace.SpanKindProducer:
				t.Errorf("the span's kind is %v, want producer", span.SpanKind())
			case withSpan && span.Parent().SpanID() != parent.SpanContext().SpanID():
				t.Errorf("the span's parent is %v, want the caller's span %v", span.Parent().SpanID(), parent.SpanContext().SpanID())
			case withSpan && sent.TraceID != parent.SpanContext().TraceID().String():
				t.Errorf("Sent.TraceID %q, want the caller's trace %s", sent.TraceID, parent.SpanContext().TraceID())
			case !withSpan && span.Parent().IsValid():
				t.Errorf("the span has parent %v, want none", span.Parent())
			case sent.TraceID != span.SpanContext().TraceID().String():
				t.Errorf("Sent.TraceID %q, want the span's trace %s", sent.TraceID, span.SpanContext().TraceID())
			}
			want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
			if got := stored(t, env.JS, sent.StreamSeq).Get("traceparent"); got != want {
				t.Errorf("the stored message's traceparent is %q, want %q, naming the send span", got, want)
			}
			wantAttrs := map[attribute.Key]string{
				tracing.MessagingSystem:      "nats",
				tracing.MessagingDestination: "approvals.default.intent-0001",
				tracing.MessagingOperation:   "send",
				tracing.MessagingMessageID:   sent.MsgID,
				tracing.IntentID:             "intent-0001",
				tracing.Scope:                "default",
				tracing.Destination:          "default",
			}
			got := tracingtest.Attributes(span)
			for k, v := range wantAttrs {
				if got[k] != v {
					t.Errorf("attribute %s is %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// With no tracer provider set, a publish carries no trace header, Sent
// names no trace, and a traceparent of the caller's own is left as given.
func TestAPublishWithTracingOffCarriesNoTraceContext(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent, err := send.NewClient(env.JS).Publish(ctx, parsed(t))
	if err != nil {
		t.Fatal(err)
	}
	if sent.TraceID != "" {
		t.Errorf("Sent.TraceID %q with tracing off, want none", sent.TraceID)
	}
	if h := stored(t, env.JS, sent.StreamSeq); h.Get("traceparent") != "" || h.Get("tracestate") != "" {
		t.Errorf("the stored message carries trace context with tracing off: %v", h)
	}
	own := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	h := nats.Header{}
	h.Set("traceparent", own)
	sent, err = send.NewClient(env.JS).Publish(ctx, parsed(t), send.Header(h))
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(t, env.JS, sent.StreamSeq).Get("traceparent"); got != own || sent.TraceID != "" {
		t.Errorf("the caller's traceparent became %q (TraceID %q), want %q as given", got, sent.TraceID, own)
	}
}

// A publish the stream does not acknowledge ends its span as an error.
func TestAFailedPublishsSpanSaysItFailed(t *testing.T) {
	env := testenv.Start(t)
	rec := tracingtest.Record(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := send.NewClient(env.JS).Publish(ctx, parsed(t)); err == nil {
		t.Fatal("a publish with an ended context succeeded")
	}
	spans := tracingtest.Named(rec, "send approvals.default.intent-0001")
	if len(spans) != 1 || spans[0].Status().Code != codes.Error {
		t.Fatalf("send spans %v, want one whose status is an error", spans)
	}
}

// Tracing that is off costs a publish no more than starting a span that
// does not record costs (the span and the context that holds it): no
// attribute, name or header is made for it.
func TestAPublishSpanWithTracingOffAllocatesNoMoreThanTheSpan(t *testing.T) {
	data := envelope(t)
	ctx := context.Background()
	bare := testing.AllocsPerRun(100, func() {
		_, span := tracing.Tracer().Start(ctx, "send")
		span.End()
	})
	s := send.Sent{Subject: "approvals.default.intent-0001", MsgID: "send-1", IntentID: "intent-0001"}
	allocs := testing.AllocsPerRun(100, func() {
		_, span := send.StartSend(ctx, &s, data)
		span.End()
	})
	if allocs > bare {
		t.Fatalf("starting and ending a publish span with tracing off allocates %v times, a bare span %v", allocs, bare)
	}
}
