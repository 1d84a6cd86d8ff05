package otlp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// settings are the environment variables Start reads; each test starts
// with all of them unset (empty), whatever the environment holds.
var settings = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
}

func setenv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range settings {
		t.Setenv(name, env[name])
	}
}

// keepProvider restores the global tracer provider and propagator when
// the test ends.
func keepProvider(t *testing.T) {
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		if otel.GetTracerProvider() != prev {
			otel.SetTracerProvider(prev)
		}
		if otel.GetTextMapPropagator() != prevProp {
			otel.SetTextMapPropagator(prevProp)
		}
	})
}

func TestTracingIsOffUnlessTheEnvironmentNamesAnEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"no endpoint", nil},
		{"no endpoint, whatever else is set", map[string]string{"OTEL_TRACES_SAMPLER": "bogus", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{"an endpoint with the SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{"an endpoint with the exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, tc.env)
			keepProvider(t)
			before := otel.GetTracerProvider()
			stop, err := Start(context.Background(), "sendtwice-test")
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if Enabled() || otel.GetTracerProvider() != before {
				t.Fatalf("tracing on (Enabled %v, provider changed %v)", Enabled(), otel.GetTracerProvider() != before)
			}
			if err := stop(context.Background()); err != nil {
				t.Fatalf("stop: %v", err)
			}
		})
	}
}

func TestABadSettingIsRefusedNamingIt(t *testing.T) {
	for _, tc := range []struct {
		name, variable, value string
		also                  map[string]string
	}{
		{"a gRPC protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", nil},
		{"a JSON protocol for traces", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", nil},
		{"an unknown sampler", "OTEL_TRACES_SAMPLER", "bogus", nil},
		{"a ratio above 1", "OTEL_TRACES_SAMPLER_ARG", "2", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio"}},
		{"a ratio that is no number", "OTEL_TRACES_SAMPLER_ARG", "half", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}},
		{"an exporter other than otlp", "OTEL_TRACES_EXPORTER", "zipkin", nil},
		{"a resource attribute without a value", "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", tc.variable: tc.value}
			for k, v := range tc.also {
				env[k] = v
			}
			setenv(t, env)
			keepProvider(t)
			before := otel.GetTracerProvider()
			_, err := Start(context.Background(), "sendtwice-test")
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.variable) || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("Start with %s=%q: %v, want ErrConfig naming %s and its value", tc.variable, tc.value, err, tc.variable)
			}
			if Enabled() || otel.GetTracerProvider() != before {
				t.Fatal("a refused setting turned tracing on")
			}
		})
	}
}

// collector is an OTLP/HTTP receiver that keeps the bodies posted to it.
type collector struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (c *collector) received() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.bodies, nil)
}

func TestSpansAreExportedWithoutTheQueryOfTheirURL(t *testing.T) {
	var col collector
	srv := httptest.NewServer(&col)
	defer srv.Close()
	setenv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
	keepProvider(t)
	stop, err := Start(context.Background(), "sendtwice-test")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !Enabled() {
		t.Fatal("Enabled = false with an endpoint set")
	}
	// Only the trace context travels: no baggage a publisher could fill
	// for the executors to pass on to the task services.
	if got := otel.GetTextMapPropagator().Fields(); !slices.Equal(got, []string{"traceparent", "tracestate"}) {
		t.Errorf("the propagator carries %q, want traceparent and tracestate alone", got)
	}
	const full = "http://h/p?apikey=x#f"
	tracer := otel.Tracer("test")
	_, atStart := tracer.Start(context.Background(), "url given at start", trace.WithAttributes(semconv.URLFull(full)))
	atStart.End()
	// otelhttp sets url.full after the span started.
	_, later := tracer.Start(context.Background(), "url given later")
	later.SetAttributes(semconv.URLFull(full))
	later.End()
	if err := stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if Enabled() {
		t.Fatal("Enabled after stop")
	}
	got := col.received()
	for _, want := range []string{"url given at start", "url given later", "http://h/p", "sendtwice-test"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Fatalf("the spans exported lack %q", want)
		}
	}
	for _, never := range []string{"apikey", "http://h/p?", "#f"} {
		if bytes.Contains(got, []byte(never)) {
			t.Fatalf("the spans exported hold %q", never)
		}
	}
}
