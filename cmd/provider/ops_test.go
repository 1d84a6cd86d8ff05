package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/provider"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricLines returns the sample lines of a /metrics body that start with
// prefix.
func metricLines(body, prefix string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func TestServeHTTPShowsTheThreeCountersAndHealth(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()
	addr := freeAddr(t)

	serveLog, stopServe := startServe(t, "serve", "--server", url, "--data", dir, "--http", addr)
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _, err := proctest.Get(base + "/readyz"); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not become ready; log:\n%s", serveLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body, err := proctest.Get(base + "/readyz?verbose"); err != nil || code != 200 ||
		body != "[+]nats ok\n[+]service ok\n[+]store ok\nok\n" {
		t.Errorf("/readyz?verbose: %d %q %v", code, body, err)
	}
	if code, body, err := proctest.Get(base + "/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := provider.NewClient(nc)
	req := request("intent-metrics", "check items")
	for _, want := range []string{provider.OutcomeCreated, provider.OutcomeReplayed} {
		resp, err := client.Create(context.Background(), req)
		if err != nil || resp.Outcome != want {
			t.Fatalf("create: %+v, %v; want %s", resp, err, want)
		}
	}

	code, body, err := proctest.Get(base + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	got := strings.Join(metricLines(body, "sendtwice_"), "\n")
	want := "sendtwice_creates_executed 1\nsendtwice_keys_compacted 0\nsendtwice_keys_live 1\nsendtwice_requests_received 2\n" +
		"sendtwice_scope_creates_executed{scope=\"default\"} 1\nsendtwice_scope_keys_live{scope=\"default\"} 1\n" +
		"sendtwice_scope_requests_received{scope=\"default\"} 2\nsendtwice_scope_tasks_existing{scope=\"default\"} 1\n" +
		"sendtwice_tasks_deleted 0\nsendtwice_tasks_existing 1"
	if got != want {
		t.Errorf("service metrics:\n%s\nwant:\n%s", got, want)
	}
	for _, typ := range []string{"# TYPE sendtwice_requests_received gauge", "# TYPE sendtwice_creates_executed gauge", "# TYPE sendtwice_tasks_existing gauge"} {
		if !strings.Contains(body, typ) {
			t.Errorf("/metrics lacks %q", typ)
		}
	}
	if len(metricLines(body, "go_goroutines")) != 1 || len(metricLines(body, "process_start_time_seconds")) != 1 {
		t.Error("/metrics lacks the Go runtime and process metrics")
	}

	stopServe()
	if _, _, err := proctest.Get(base + "/healthz"); err == nil {
		t.Error("the HTTP server still answers after serve returned")
	}
}

func TestServeHTTPRefusesAnAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = invoke(t, "nats://127.0.0.1:1", "serve", "--data", t.TempDir(), "--http", l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Errorf("serve with its HTTP address taken: %v", err)
	}
}
