// Package otlp starts a program's tracing from the environment, as
// OpenTelemetry's users expect: spans are exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and nothing is traced when it is not. OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// and the exporter's own OTEL_EXPORTER_OTLP_* settings (headers, timeout,
// certificates) apply. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn it off.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
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
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("otlp: starting the trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return noop, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", ErrConfig, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(queryRedactor{}),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
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

// queryRedactor drops the query and fragment of an HTTP client span's
// url.full as the span starts (otelhttp records the whole URL), so that no
// span carries what a URL's query may hold.
type queryRedactor struct{}

func (queryRedactor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	for _, kv := range s.Attributes() {
		if kv.Key != semconv.URLFullKey {
			continue
		}
		if u, err := url.Parse(kv.Value.AsString()); err == nil && (u.RawQuery != "" || u.Fragment != "") {
			u.RawQuery, u.Fragment = "", ""
			s.SetAttributes(attribute.String(string(semconv.URLFullKey), u.String()))
		}
	}
}

func (queryRedactor) OnEnd(sdktrace.ReadOnlySpan)      {}
func (queryRedactor) Shutdown(context.Context) error   { return nil }
func (queryRedactor) ForceFlush(context.Context) error { return nil }
