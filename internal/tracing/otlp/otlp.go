package otlp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// ErrConfig is the error of a setting the environment gives that tracing
// cannot use; the program refuses to start with it.
var ErrConfig = errors.New("otlp: bad tracing setting")

var enabled atomic.Bool

// Enabled reports whether Start turned tracing on in this process.
func Enabled() bool { return enabled.Load() }

// Start turns tracing on when the environment asks for it, naming the
// process service (unless OTEL_SERVICE_NAME names it), and returns the
// function that flushes and stops it (a no-op when tracing is off).
func Start(ctx context.Context, service string) (stop func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	on, err := wanted()
	if err != nil || !on {
		return noop, err
	}
	if err := checkSampler(); err != nil {
		return noop, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return noop, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", ErrConfig, err)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("otlp: starting the trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(queryRedactor{sdktrace.NewBatchSpanProcessor(exp)}),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(tp)
	// W3C trace context alone: no baggage, which a publisher could fill
	// and every executor would pass on to the task services.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// wanted reports whether the environment turns tracing on, refusing a
// protocol other than http/protobuf.
func wanted() (bool, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") ||
		strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false, nil
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false, nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER %q: want otlp or none", ErrConfig, e)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(name); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%w: %s %q: only http/protobuf is supported", ErrConfig, name, p)
			}
			break
		}
	}
	return true, nil
}

// checkSampler refuses a sampler or argument the SDK would silently
// replace with its default.
func checkSampler() error {
	name := os.Getenv("OTEL_TRACES_SAMPLER")
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG")
		if arg == "" {
			return nil
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", ErrConfig, arg)
		}
		return nil
	}
	return fmt.Errorf("%w: OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio or a parentbased_ one of them", ErrConfig, name)
}

// queryRedactor hands next every span that ends with the query and
// fragment of its url.full dropped, so that no span exported carries what a
// URL's query may hold. otelhttp records the whole URL, and only after the
// span started: the span is changed on its way out, not as it starts.
type queryRedactor struct{ next sdktrace.SpanProcessor }

func (q queryRedactor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { q.next.OnStart(ctx, s) }
func (q queryRedactor) OnEnd(s sdktrace.ReadOnlySpan)                         { q.next.OnEnd(withoutQuery(s)) }
func (q queryRedactor) Shutdown(ctx context.Context) error                    { return q.next.Shutdown(ctx) }
func (q queryRedactor) ForceFlush(ctx context.Context) error                  { return q.next.ForceFlush(ctx) }

// withoutQuery returns s, or s seen with its url.full cut before its query
// or fragment when it has one.
func withoutQuery(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	attrs := s.Attributes()
	for i, kv := range attrs {
		if kv.Key != semconv.URLFullKey {
			continue
		}
		full := kv.Value.AsString()
		if cut := strings.IndexAny(full, "?#"); cut >= 0 {
			attrs = slices.Clone(attrs)
			attrs[i] = semconv.URLFull(full[:cut])
			return redactedSpan{s, attrs}
		}
	}
	return s
}

// redactedSpan is a span as exported with attributes of its own.
type redactedSpan struct {
	sdktrace.ReadOnlySpan
	attrs []attribute.KeyValue
}

func (r redactedSpan) Attributes() []attribute.KeyValue { return r.attrs }
