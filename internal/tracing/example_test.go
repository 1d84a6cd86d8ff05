package tracing_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/tracing"
)

// A sender carries its span's context in a message's header; the receiver
// continues the same trace from it. Tracing is on once a program (otlp.Start)
// or an application sets a tracer provider and the W3C propagator.
func Example() {
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	defer func() { otel.SetTracerProvider(prev); otel.SetTextMapPropagator(prevProp) }()
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.TraceContext{})

	ctx, send := tracing.Tracer().Start(context.Background(), "send APPROVALS.team-a",
		trace.WithSpanKind(trace.SpanKindProducer))
	defer send.End()
	var msg nats.Msg
	if tracing.On() {
		msg.Header = nats.Header{} // made only when tracing is on
	}
	fmt.Println("injected:", tracing.Inject(ctx, msg.Header))

	received := tracing.Extract(context.Background(), msg.Header)
	_, process := tracing.Tracer().Start(received, "process APPROVALS", trace.WithSpanKind(trace.SpanKindConsumer))
	defer process.End()
	fmt.Println("same trace:", process.SpanContext().TraceID() == send.SpanContext().TraceID())
	// Output:
	// injected: true
	// same trace: true
}
