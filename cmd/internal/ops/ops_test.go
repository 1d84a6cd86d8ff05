package ops_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sendtwice/sendtwice/cmd/internal/ops"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sendtwice_test_gauge", Help: "A test gauge."})
	g.Set(7)
	reg.MustRegister(g)
	s, err := ops.Listen("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	base := "http://" + s.Addr()

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "sendtwice_test_gauge 7\n") {
		t.Errorf("/metrics: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "[-]startup failed: starting") {
		t.Errorf("/readyz before any check: %d %q", code, body)
	}

	var natsErr atomic.Pointer[error]
	s.AddCheck("nats", func(context.Context) error {
		if p := natsErr.Load(); p != nil {
			return *p
		}
		return nil
	})
	s.AddCheck("slow", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		return nil
	})
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz when every check holds: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz?verbose"); code != 200 || body != "[+]nats ok\n[+]slow ok\nok\n" {
		t.Errorf("/readyz?verbose: %d %q", code, body)
	}
	failed := errors.New("NATS connection RECONNECTING\nsecond line")
	natsErr.Store(&failed)
	if code, body := get(t, base+"/readyz"); code != 503 || body != "[-]nats failed: NATS connection RECONNECTING second line\nnot ready\n" {
		t.Errorf("/readyz with a failing check: %d %q", code, body)
	}
	natsErr.Store(nil)
	s.Drain()
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "[-]shutdown failed") {
		t.Errorf("/readyz while draining: %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while draining: %d, want 200", code)
	}
	resp, err := http.Post(base+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d", resp.StatusCode)
	}
	if code, _ := get(t, base+"/nothing"); code != 404 {
		t.Errorf("/nothing: %d", code)
	}

	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("still serving after Close")
	}
}

func TestListenRefusesAnAddressInUse(t *testing.T) {
	s, err := ops.Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := ops.Listen(s.Addr(), prometheus.NewRegistry(), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a second server on the same address started")
	}
}
