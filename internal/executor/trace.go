package executor

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
)

// The spans of one delivery: the consumer span, and its children.
const (
	spanProcess       = "process " + topology.ApprovalsStream
	spanGate          = "gate"
	spanReceiptLookup = "receipt lookup"
	spanCreate        = "task service create"
	spanReceiptStore  = "receipt store"
	spanAck           = "ack"
)

// OutcomeRetry is the sendtwice.outcome of a delivery's span when the
// delivery is given back to be tried again: no receipt ends it.
const OutcomeRetry = "retry"

// consumerSpan starts a delivery's span when its message carries no trace
// context: one slice for every delivery, so that an untraced one
// allocates none.
var consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// noSpan is the span of what is not traced: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// startSpan starts the delivery's consumer span. Its parent is the trace
// context the message carries, so that each delivery of a message is a
// span of its own in the publisher's trace, and it links to that publish
// span. With tracing off it costs a context and a span value; attributes
// are built only for a span that records.
func (e *Executor) startSpan(d *delivery) {
	parent := tracing.Extract(context.Background(), d.msg.Headers())
	opts := consumerSpan
	if remote := trace.SpanContextFromContext(parent); remote.IsValid() {
		opts = []trace.SpanStartOption{consumerSpan[0], trace.WithLinks(trace.Link{SpanContext: remote})}
	}
	d.ctx, d.span = tracing.Tracer().Start(parent, spanProcess, opts...)
	if d.span.IsRecording() {
		d.span.SetAttributes(tracing.NATS, tracing.MessagingDestination.String(d.msg.Subject()),
			tracing.MessagingOperation.String("process"),
			tracing.MessagingMessageID.String(d.msg.Headers().Get(jetstream.MsgIDHeader)),
			tracing.Executor.String(e.cfg.ID))
	}
}

// recording reports whether the delivery's span records.
func (d *delivery) recording() bool { return d.span != nil && d.span.IsRecording() }

// child starts a span named name in the delivery's trace and returns it
// with its context. A delivery whose span does not record starts none: it
// gets its own context and a span that records nothing.
func (d *delivery) child(name string) (context.Context, trace.Span) {
	if !d.recording() {
		return d.ctx, noSpan
	}
	return tracing.Tracer().Start(d.ctx, name)
}

// endSpan ends the delivery's span, once, with the delivery's outcome (a
// receipt's; OutcomeRetry and err for a delivery given back) and the ids
// it names.
func (d *delivery) endSpan(outcome string, err error) {
	s := d.span
	if s == nil {
		return
	}
	d.span = nil
	if s.IsRecording() {
		s.SetAttributes(tracing.Outcome.String(outcome))
		if d.id.IntentID != "" {
			s.SetAttributes(tracing.IntentID.String(d.id.IntentID))
		}
		if scope := receiptScope(d); scope != "" {
			s.SetAttributes(tracing.Scope.String(scope))
		}
		tracing.Fail(s, err)
	}
	s.End()
}

// endChild ends span, a child of a delivery's span, failed with err if
// it is not nil.
func endChild(span trace.Span, err error) {
	tracing.Fail(span, err)
	span.End()
}

// gateError is the gate's refusal err as a *gate.Error: an error of
// another kind is a refusal of the envelope.
func gateError(err error) *gate.Error {
	var ge *gate.Error
	if !errors.As(err, &ge) {
		ge = &gate.Error{Check: gate.CheckEnvelope, Path: "$", Reason: err.Error()}
	}
	return ge
}

// checkGate has the gate check the delivery in a span of its own, which a
// refusal fails naming the check that refused.
func (e *Executor) checkGate(d *delivery) (*gate.Verdict, error) {
	_, span := d.child(spanGate)
	v, err := e.cfg.Gate.CheckDelivery(d.msg.Subject(), d.msg.Data(), d.stored)
	if err != nil && span.IsRecording() {
		span.SetAttributes(tracing.Check.String(gateError(err).Check))
	}
	endChild(span, err)
	if err == nil && d.recording() {
		d.span.SetAttributes(tracing.Destination.String(v.Request.DestinationName()))
	}
	return v, err
}
