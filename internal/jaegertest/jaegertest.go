package jaegertest

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/proctest"
)

// Version is the Jaeger the rig runs, the version tools/go.mod pins.
const Version = "v1.75.0"

// module is the Go module the jaeger command is built from.
const module = "github.com/jaegertracing/jaeger"

// BuildCommand builds and installs the binary Binary finds, from the
// repository's root.
const BuildCommand = "(cd tools && GOWORK=off go install " + module + "/cmd/jaeger)"

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
// version was found.
func Binary() (string, error) {
	var candidates []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		candidates = append(candidates, filepath.Join(gobin, "jaeger"))
	}
	gopath, _, _ := strings.Cut(os.Getenv("GOPATH"), string(os.PathListSeparator))
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	if gopath != "" {
		candidates = append(candidates, filepath.Join(gopath, "bin", "jaeger"))
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		candidates = append(candidates, p)
	}
	var found []string
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		v, err := builtVersion(p)
		if err == nil && v == Version {
			return p, nil
		}
		found = append(found, fmt.Sprintf("%s (%s)", p, cmpErr(v, err)))
	}
	if len(found) == 0 {
		return "", fmt.Errorf("jaegertest: no jaeger binary in %s", strings.Join(candidates, ", "))
	}
	return "", fmt.Errorf("jaegertest: no jaeger %s: found %s", Version, strings.Join(found, ", "))
}

// builtVersion reads the version of the jaeger module a binary was built
// from, out of its build information.
func builtVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	if info.Main.Path == module {
		return info.Main.Version, nil
	}
	for _, d := range info.Deps {
		if d.Path == module {
			return d.Version, nil
		}
	}
	return "", errors.New("not built from " + module)
}

func cmpErr(version string, err error) string {
	if err != nil {
		return err.Error()
	}
	return "version " + version
}

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
	otlp, query, grpc := proctest.FreePort(t, "jaegertest"), proctest.FreePort(t, "jaegertest"), proctest.FreePort(t, "jaegertest")
	j := &Jaeger{
		OTLPEndpoint: "http://127.0.0.1:" + strconv.Itoa(otlp),
		UI:           "http://127.0.0.1:" + strconv.Itoa(query),
		LogFile:      filepath.Join(dir, "jaeger.log"),
		t:            t,
		client:       &http.Client{Timeout: 10 * time.Second},
	}
	conf := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(conf, []byte(config(otlp, query, grpc)), 0o600); err != nil {
		t.Fatal(err)
	}
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
	j.proc.Start(t, j.UI+"/api/services", &http.Client{Timeout: time.Second}, startTimeout, 20*time.Millisecond)
	return j
}

// config is Jaeger's configuration: in-memory storage, OTLP over HTTP on
// otlp, the query service's HTTP API and UI on query and its gRPC API on
// grpc, all on 127.0.0.1.
func config(otlp, query, grpc int) string {
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
    http:
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
`, query, grpc, otlp)
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
