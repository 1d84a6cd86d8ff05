package tracing

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span the project makes.
const ScopeName = "github.com/sendtwice/sendtwice"

// Tracer is the project's tracer, from the global tracer provider.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// unset is the global tracer provider as the process starts:
// OpenTelemetry's placeholder, whose spans record nothing.
var unset = otel.GetTracerProvider()

// On reports whether a tracer provider that may record has been set
// (otlp.Start, or an application's own; not a no-op one). A hot path asks
// it before it starts a span: even a span that records nothing costs a
// context value and the span, which On spares when tracing is off.
func On() bool {
	tp := otel.GetTracerProvider()
	_, none := tp.(noop.TracerProvider)
	return tp != unset && !none
}

// The attributes the project's spans carry: its own, none of which holds
// a secret or a task's content, and OpenTelemetry's messaging ones, as the
// spans of a NATS message name them.
const (
	IntentID                = attribute.Key("sendtwice.intent_id")
	Scope                   = attribute.Key("sendtwice.scope")
	Destination             = attribute.Key("sendtwice.destination")
	Outcome                 = attribute.Key("sendtwice.outcome")
	TaskID                  = attribute.Key("sendtwice.task_id")
	Check                   = attribute.Key("sendtwice.gate.check")
	Executor                = attribute.Key("sendtwice.executor")
	MessagingSystem         = attribute.Key("messaging.system")
	MessagingDestination    = attribute.Key("messaging.destination.name")
	MessagingOperation      = attribute.Key("messaging.operation.type")
	MessagingMessageID      = attribute.Key("messaging.message.id")
	MessagingDeliveryCount  = attribute.Key("messaging.nats.message.delivery_count")
	MessagingStreamSequence = attribute.Key("messaging.nats.stream.sequence")
)

// NATS is the messaging.system of every span about a NATS message.
var NATS = MessagingSystem.String("nats")

// Header adapts a NATS message's header to OpenTelemetry's propagators.
type Header nats.Header

var _ propagation.TextMapCarrier = Header(nil)

// Get returns the first value of key.
func (h Header) Get(key string) string { return nats.Header(h).Get(key) }

// Set sets key to value.
func (h Header) Set(key, value string) { nats.Header(h).Set(key, value) }

// Keys lists the keys set.
func (h Header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx into h (traceparent, tracestate)
// with the global propagator, and reports whether it did: when ctx holds a
// valid span context and h is not nil. A span that is not sampled is
// carried too (its traceparent says so), so that the receiver follows the
// sender's sampling decision instead of starting a trace of its own. With
// tracing off no span context is valid: h is left as it was, and may be
// nil then.
func Inject(ctx context.Context, h nats.Header) bool {
	if h == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return false
	}
	otel.GetTextMapPropagator().Inject(ctx, Header(h))
	return true
}

// Extract returns ctx with the remote span context h carries, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, Header(h))
}

// TraceID is the id of ctx's trace in hex, "" when ctx holds no valid
// span context (tracing is off, or the span was not sampled in).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// Fail marks span as failed with err, when it records.
func Fail(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
