package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
)

// tracedContext holds a valid, sampled span context with fixed ids.
func tracedContext() context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

const (
	wantTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	wantSpanID  = "00f067aa0ba902b7"
)

func TestTheLogHandlerAddsTheTraceAndSpanIDsOnlyForAValidSpanContext(t *testing.T) {
	invalid := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})
	for _, format := range []struct {
		name string
		make func(*bytes.Buffer) slog.Handler
	}{
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"JSON", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		for _, tc := range []struct {
			name   string
			ctx    context.Context
			traced bool
		}{
			{"a record logged with a traced context carries its ids", tracedContext(), true},
			{"a record logged without a span carries none", context.Background(), false},
			{"a record logged with an invalid span context carries none", invalid, false},
		} {
			t.Run(format.name+": "+tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				log := slog.New(tracing.LogHandler(format.make(&buf))).With("component", "test")
				log.InfoContext(tc.ctx, "hello", "n", 1)
				line := buf.String()
				for _, want := range []string{"hello", "component", "test"} {
					if !strings.Contains(line, want) {
						t.Fatalf("record %q lacks %q", line, want)
					}
				}
				has := strings.Contains(line, "trace_id") || strings.Contains(line, "span_id")
				if has != tc.traced {
					t.Fatalf("record %q: has trace ids %v, want %v", line, has, tc.traced)
				}
				if tc.traced && (!strings.Contains(line, wantTraceID) || !strings.Contains(line, wantSpanID)) {
					t.Fatalf("record %q lacks trace id %s or span id %s", line, wantTraceID, wantSpanID)
				}
				if format.name == "JSON" && tc.traced {
					var rec map[string]any
					if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["trace_id"] != wantTraceID || rec["span_id"] != wantSpanID {
						t.Fatalf("record %q: trace_id %v span_id %v (%v)", line, rec["trace_id"], rec["span_id"], err)
					}
				}
			})
		}
	}
}

func TestTheTraceContextTravelsThroughANATSHeader(t *testing.T) {
	tracingtest.Record(t)
	ctx, span := tracing.Tracer().Start(context.Background(), "send")
	defer span.End()
	h := nats.Header{}
	if !tracing.Inject(ctx, h) {
		t.Fatal("Inject with a recording span reported that it wrote nothing")
	}
	if h.Get("traceparent") == "" {
		t.Fatalf("header after Inject: %v, want a traceparent", h)
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), h))
	want := span.SpanContext()
	if !got.IsRemote() || got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsSampled() {
		t.Fatalf("extracted %+v, want the remote context of %+v", got, want)
	}
	if tracing.TraceID(ctx) != want.TraceID().String() {
		t.Fatalf("TraceID = %q, want %q", tracing.TraceID(ctx), want.TraceID())
	}
}

func TestWithTracingOffInjectWritesNothing(t *testing.T) {
	if tracing.On() {
		t.Fatal("On before any tracer provider was set")
	}
	ctx, span := tracing.Tracer().Start(context.Background(), "send")
	defer span.End()
	var none nats.Header
	if tracing.Inject(ctx, none) || none != nil {
		t.Fatalf("Inject with tracing off into a nil header: header %v", none)
	}
	empty := nats.Header{}
	if tracing.Inject(ctx, empty) || len(empty) != 0 {
		t.Fatalf("Inject with tracing off wrote %v", empty)
	}
	if tracing.TraceID(ctx) != "" {
		t.Fatalf("TraceID with tracing off = %q", tracing.TraceID(ctx))
	}
	if got := tracing.Extract(context.Background(), nil); got != context.Background() {
		t.Fatal("Extract from a nil header changed the context")
	}
}

func TestInjectWithANilHeaderWritesNothingEvenWhenTraced(t *testing.T) {
	tracingtest.Record(t)
	ctx, span := tracing.Tracer().Start(context.Background(), "send")
	defer span.End()
	var none nats.Header
	if tracing.Inject(ctx, none) || none != nil {
		t.Fatal("Inject into a nil header reported that it wrote")
	}
}

// An executor that samples a trace out still tells the service so: the
// service follows the decision instead of starting a trace of its own.
func TestAnUnsampledSpanIsCarriedSoThatTheReceiverDropsItToo(t *testing.T) {
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prev); otel.SetTextMapPropagator(prevProp) })
	otel.SetTextMapPropagator(propagation.TraceContext{})
	sender := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	otel.SetTracerProvider(sender)
	ctx, span := tracing.Tracer().Start(context.Background(), "send")
	defer span.End()
	h := nats.Header{}
	if !tracing.Inject(ctx, h) || !strings.HasSuffix(h.Get("traceparent"), "-00") {
		t.Fatalf("Inject of an unsampled span: header %v, want a traceparent with flags 00", h)
	}
	if tracing.TraceID(ctx) != "" {
		t.Fatalf("TraceID of an unsampled span = %q, want none", tracing.TraceID(ctx))
	}
	receiver := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	otel.SetTracerProvider(receiver)
	_, child := tracing.Tracer().Start(tracing.Extract(context.Background(), h), "process")
	defer child.End()
	if child.IsRecording() || child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("receiver's span: recording %v, trace %s; want not recording, in trace %s",
			child.IsRecording(), child.SpanContext().TraceID(), span.SpanContext().TraceID())
	}
}

func TestOnSaysWhetherATracerProviderIsSet(t *testing.T) {
	if tracing.On() {
		t.Fatal("On before any tracer provider was set")
	}
	t.Run("recording", func(t *testing.T) {
		tracingtest.Record(t)
		if !tracing.On() {
			t.Fatal("On = false with a tracer provider set")
		}
	})
	if tracing.On() {
		t.Fatal("On after the test's provider was removed")
	}
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	otel.SetTracerProvider(noop.NewTracerProvider())
	if tracing.On() {
		t.Fatal("On with a no-op tracer provider set")
	}
}

func TestFailMarksARecordingSpanAndLeavesOthersAlone(t *testing.T) {
	rec := tracingtest.Record(t)
	_, span := tracing.Tracer().Start(context.Background(), "failing")
	tracing.Fail(span, nil)
	tracing.Fail(span, errors.New("store down"))
	span.End()
	_, ok := tracing.Tracer().Start(context.Background(), "fine")
	tracing.Fail(ok, nil)
	ok.End()
	for _, tc := range []struct {
		name string
		code codes.Code
		desc string
	}{{"failing", codes.Error, "store down"}, {"fine", codes.Unset, ""}} {
		s := tracingtest.Wait(t, rec, tc.name, 1)[0]
		if s.Status().Code != tc.code || s.Status().Description != tc.desc {
			t.Errorf("span %s: status %+v, want %v %q", tc.name, s.Status(), tc.code, tc.desc)
		}
	}
	// A span that does not record is left alone, without a panic.
	tracing.Fail(trace.SpanFromContext(context.Background()), errors.New("x"))
}
