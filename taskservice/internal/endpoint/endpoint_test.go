package endpoint_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
	"github.com/sendtwice/sendtwice/taskservice/internal/endpoint"
)

// roundTripper is a transport made of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestEveryRequestIsOneClientSpanCarriedToTheServer(t *testing.T) {
	carried := 0
	own := roundTripper(func(r *http.Request) (*http.Response, error) {
		carried++
		return http.DefaultTransport.RoundTrip(r)
	})
	for _, tc := range []struct {
		name      string
		given     *http.Client
		byOwnWant int
	}{
		{"a client made for the adapter", nil, 0},
		{"a client given with a transport of its own, which carries the request", &http.Client{Transport: own}, 1},
		{"a client given without a transport", &http.Client{}, 0},
		{"a client given that is traced already, not traced twice", &http.Client{Transport: otelhttp.NewTransport(nil)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracingtest.Record(t)
			carried = 0
			traceparent := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				traceparent <- r.Header.Get("traceparent")
			}))
			defer srv.Close()
			ctx, caller := tracing.Tracer().Start(context.Background(), "caller")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/tasks/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := endpoint.Client(tc.given, 0, 5*time.Second, 0, 4).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			caller.End()
			spans := tracingtest.Named(rec, "HTTP GET")
			if len(spans) != 1 || spans[0].Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Fatalf("%d HTTP GET spans, want one whose parent is the caller", len(spans))
			}
			if got, want := <-traceparent, "00-"+caller.SpanContext().TraceID().String()+"-"+spans[0].SpanContext().SpanID().String()+"-01"; got != want {
				t.Fatalf("the server got traceparent %q, want %q", got, want)
			}
			if carried != tc.byOwnWant {
				t.Fatalf("the given transport carried %d requests, want %d", carried, tc.byOwnWant)
			}
		})
	}
}

func TestTheClientNeverFollowsARedirect(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://127.0.0.1:1/elsewhere", http.StatusFound))
	defer srv.Close()
	resp, err := endpoint.Client(nil, 0, 5*time.Second, 0, 4).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the redirect itself (302)", resp.StatusCode)
	}
}

func TestARequestBodyReachesTheServerWhole(t *testing.T) {
	const body = "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n"
	for _, tc := range []struct {
		name string
		body func() io.Reader
	}{
		{"a body in memory", func() io.Reader { return bytes.NewReader([]byte(body)) }},
		{"a body read as it goes", func() io.Reader { return io.MultiReader(bytes.NewReader([]byte(body))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- string(b)
			}))
			defer srv.Close()
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/tasks/a.ics", tc.body())
			if err != nil {
				t.Fatal(err)
			}
			resp, err := endpoint.Client(nil, 0, 5*time.Second, 0, 4).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if b := <-got; b != body {
				t.Fatalf("the server got %q, want %q", b, body)
			}
		})
	}
}
