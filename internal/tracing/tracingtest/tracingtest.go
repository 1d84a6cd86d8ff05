package tracingtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Record installs, until the test ends, a tracer provider that samples
// every span and the W3C trace context propagator, and returns the
// exporter that holds each span as it ends. The provider and propagator
// the test found are restored when it ends.
func Record(tb testing.TB) *tracetest.InMemoryExporter {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	prevProvider, prevPropagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tb.Cleanup(func() {
		otel.SetTracerProvider(prevProvider)
		otel.SetTextMapPropagator(prevPropagator)
		if err := tp.Shutdown(context.Background()); err != nil {
			tb.Errorf("tracingtest: shutting the test's tracer provider down: %v", err)
		}
	})
	return exp
}

// Named returns the ended spans called name, in the order they ended.
func Named(exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Wait waits up to 10 s for n spans called name to have ended (a server
// may end its span after the caller has its reply) and returns them; the
// test fails if they do not.
func Wait(tb testing.TB, exp *tracetest.InMemoryExporter, name string, n int) tracetest.SpanStubs {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := Named(exp, name)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tracingtest: %d span(s) %q ended, want %d; spans ended: %v", len(got), name, n, names(exp))
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Attr returns the value of s's attribute key as a string, and whether s
// has it.
func Attr(s tracetest.SpanStub, key attribute.Key) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// Check returns an error naming each of attrs that s lacks or holds with
// another value, nil when s has them all.
func Check(s tracetest.SpanStub, attrs ...attribute.KeyValue) error {
	var errs []error
	for _, want := range attrs {
		if got, ok := Attr(s, want.Key); !ok || got != want.Value.String() {
			errs = append(errs, fmt.Errorf("span %q: %s = %q (set: %v), want %q", s.Name, want.Key, got, ok, want.Value.String()))
		}
	}
	return errors.Join(errs...)
}

// Failed returns the description of s's status and whether it is an
// error.
func Failed(s tracetest.SpanStub) (string, bool) {
	return s.Status.Description, s.Status.Code == codes.Error
}

func names(exp *tracetest.InMemoryExporter) []string {
	var out []string
	for _, s := range exp.GetSpans() {
		out = append(out, s.Name)
	}
	return out
}
