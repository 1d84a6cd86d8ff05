package executor

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/tracing"
)

// headerMsg is a delivered message with a subject and headers only.
type headerMsg struct {
	jetstream.Msg
	subject string
	header  nats.Header
}

func (m headerMsg) Subject() string      { return m.subject }
func (m headerMsg) Headers() nats.Header { return m.header }

// With tracing off, the tracing of one delivery (its span, the children it
// would have, the trace id of its receipt and the trace context of the
// receipt's message) allocates the context that holds its span and
// nothing else: no attribute, no header, no child.
func TestAnUntracedDeliveryAllocatesOnlyTheContextOfItsSpan(t *testing.T) {
	prevTP, prevP := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(noop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevP) })

	e := &Executor{cfg: Config{ID: "exec-cost"}}
	var msg jetstream.Msg = headerMsg{subject: "approvals.default.intent-0001", header: nats.Header{
		"Nats-Msg-Id": {"intent-0001"}, "traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	receipt := nats.Header{}
	d := &delivery{}
	allocs := testing.AllocsPerRun(200, func() {
		*d = delivery{msg: msg, id: document.Identity{IntentID: "intent-0001"}}
		e.startSpan(d)
		for _, name := range []string{spanReceiptLookup, spanGate, spanCreate, spanReceiptStore, spanAck} {
			_, span := d.child(name)
			endChild(span, context.Canceled)
		}
		if tracing.TraceID(d.ctx) != "" || tracing.Inject(d.ctx, receipt) || len(receipt) != 0 {
			t.Fatal("an untraced delivery names a trace")
		}
		d.endSpan(OutcomeRetry, context.Canceled)
	})
	if allocs > 1 {
		t.Errorf("an untraced delivery's tracing allocates %v times; want 1 (the context holding its span)", allocs)
	}
}
