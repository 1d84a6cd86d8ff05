package tracingtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Wait waits up to 10 s for n spans called name to have ended in rec (a
// server may end its span after the caller has its reply) and returns
// them; the test fails if they do not.
func Wait(tb testing.TB, rec *tracetest.SpanRecorder, name string, n int) []sdktrace.ReadOnlySpan {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := Named(rec, name)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			var ended []string
			for _, s := range rec.Ended() {
				ended = append(ended, s.Name())
			}
			tb.Fatalf("tracingtest: %d span(s) %q ended, want %d; spans ended: %q", len(got), name, n, ended)
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Check returns an error naming each of attrs that span lacks or holds
// with another value, nil when span has them all.
func Check(span sdktrace.ReadOnlySpan, attrs ...attribute.KeyValue) error {
	has := Attributes(span)
	var errs []error
	for _, want := range attrs {
		if got, ok := has[want.Key]; !ok || got != want.Value.String() {
			errs = append(errs, fmt.Errorf("span %q: %s = %q (set: %v), want %q", span.Name(), want.Key, got, ok, want.Value.String()))
		}
	}
	return errors.Join(errs...)
}

// Failed returns the description of span's status and whether it is an
// error.
func Failed(span sdktrace.ReadOnlySpan) (string, bool) {
	return span.Status().Description, span.Status().Code == codes.Error
}
