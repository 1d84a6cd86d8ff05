package jaegertest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/proctest"
)

// Jaeger is one running (or stopped) Jaeger.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP receiver's base URL,
	// "http://127.0.0.1:<port>", as OTEL_EXPORTER_OTLP_ENDPOINT takes it
	// (the exporter adds /v1/traces).
	OTLPEndpoint string
	// UI is the base URL of the query service's UI and HTTP API,
	// "http://127.0.0.1:<port>".
	UI string
	// LogFile receives Jaeger's stdout and stderr.
	LogFile string

	t      testing.TB
	client *http.Client
	proc   proctest.Process
}

// Binary returns the path of a jaeger binary of Version: $GOBIN/jaeger,
// else the first $GOPATH's bin/jaeger ($HOME/go/bin/jaeger when GOPATH is
// unset), else jaeger on $PATH. The error says what is missing or which

// Require returns the jaeger binary's path. It skips the test when there
// is none of Version, or fails it under CI=true (.ci/run builds it).
func Require(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs Jaeger %s (.ci/run builds it; by hand: %s): %v", Version, BuildCommand, err)
		}
		t.Skipf("skipping: no Jaeger %s (build it from the repository's root: %s); with CI=true this fails instead: %v", Version, BuildCommand, err)
	}
	return bin
}

// startTimeout bounds a start (under a second on two idle cores).
const startTimeout = 60 * time.Second

// Start starts Jaeger for the test and waits until its query API answers;
// it is stopped when the test ends. It calls Require first.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin := Require(t)
	dir := t.TempDir()
	j := &Jaeger{
		LogFile: filepath.Join(dir, "jaeger.log"),
		t:       t,
		client:  &http.Client{Timeout: 10 * time.Second},
	}
	conf := filepath.Join(dir, "jaeger.yaml")
	j.proc = proctest.Process{Rig: "jaegertest", Name: "jaeger", Argv: []string{bin, "--config", conf}, Dir: dir,
		Env: append(os.Environ(), "HOME="+dir), OutFile: j.LogFile, Grace: 5 * time.Second,
		Tails: func() string { return "its log:\n" + proctest.TailOf(j.LogFile, 4000) }}
	t.Cleanup(func() {
		j.Stop()
		if t.Failed() {
			t.Logf("the end of Jaeger's log (%s):\n%s", j.LogFile, proctest.TailOf(j.LogFile, 4000))
		}
	})
	// The query API answers once every extension and the receiver have
	// started: the Collector starts the pipelines' receivers before it
	// reports ready, and the extensions before them.
	j.proc.StartOnFreePorts(t, 3, func(ports []int) string {
		otlp, query, grpc := ports[0], ports[1], ports[2]
		j.OTLPEndpoint = fmt.Sprintf("http://127.0.0.1:%d", otlp)
		j.UI = fmt.Sprintf("http://127.0.0.1:%d", query)
		if err := os.WriteFile(conf, []byte(config(otlp, query, grpc, os.Getenv(UIAssetsEnv))), 0o600); err != nil {
			t.Fatal(err)
		}
		return j.UI + "/api/services"
	}, &http.Client{Timeout: time.Second}, startTimeout, 20*time.Millisecond)
	return j
}

// UIAssetsEnv names the variable that may hold a directory of Jaeger UI's
// built assets (the build of jaeger-ui, holding index.html) for the query
// service to serve. A binary built from the Go module holds none: its UI
// is a placeholder page (see HasUI).
const UIAssetsEnv = "JAEGERTEST_UI_ASSETS"

// config is Jaeger's configuration: in-memory storage, OTLP over HTTP on
// otlp, the query service's HTTP API and UI on query (with the UI's
// assets from the directory uiAssets, when given) and its gRPC API on
// grpc, all on 127.0.0.1.
func config(otlp, query, grpc int, uiAssets string) string {
	ui := ""
	if uiAssets != "" {
		ui = fmt.Sprintf("    ui:\n      assets_path: %q\n", uiAssets)
	}
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
%s    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, ui, query, grpc, otlp)
}

// Env is the environment that sends a program's spans to this Jaeger:
// OTEL_EXPORTER_OTLP_ENDPOINT, and OTEL_BSP_SCHEDULE_DELAY at 100 ms so
// that a long-running program exports its spans within a moment rather
// than every 5 s.
func (j *Jaeger) Env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPEndpoint, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// TraceURL is the UI's page of the trace id.
func (j *Jaeger) TraceURL(id string) string { return j.UI + "/trace/" + id }

// Stop stops Jaeger (SIGTERM, then SIGKILL after 5 s); what it stored is
// lost. Stopping a stopped Jaeger does nothing.
func (j *Jaeger) Stop() { j.proc.Stop() }

// Running reports whether Jaeger's process is running.
func (j *Jaeger) Running() bool { return j.proc.Running() }
