package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// collector is an OTLP/HTTP endpoint that keeps what it is sent.
type collector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies = append(c.bodies, body)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// env is the environment that points a program's tracing at c.
func (c *collector) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.srv.URL}
}

// received reports whether one export c received holds both the trace id
// and the span name.
func (c *collector) received(traceID, span []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.bodies, func(b []byte) bool {
		return bytes.Contains(b, traceID) && bytes.Contains(b, span)
	})
}

var printedTrace = regexp.MustCompile(`(?m)^  trace ([0-9a-f]{32})$`)

// With tracing on, send prints the id of the trace its publish started,
// under what it prints (or as trace_id, or in the no-receipt error), and
// the trace it names is the one exported, with its send span. With
// tracing off it prints nothing about a trace.
func TestSendPrintsTheTraceItsPublishStarted(t *testing.T) {
	t.Parallel()
	served := testenv.Start(t)
	served.Executor(executor.Config{ID: "exec-1"})
	idle := testenv.Start(t) // no executor: no receipt comes
	for _, tc := range []struct {
		name   string
		url    string
		args   []string
		code   int
		traced bool
		// traceID finds the printed trace id in stdout and stderr.
		traceID func(t *testing.T, stdout, stderr string) string
	}{
		{"the receipt is followed by the trace", served.URL(), []string{"--wait", "30s"}, exitOK, true, fromLine("created: task ")},
		{"the published line is followed by the trace", idle.URL(), nil, exitOK, true, fromLine("published: stream message ")},
		{"--json prints trace_id", idle.URL(), []string{"--json"}, exitOK, true, fromJSON},
		{"no receipt names the trace", idle.URL(), []string{"--wait", "1ns"}, exitNoAnswer, true, fromNoReceipt},
		{"tracing off prints no trace", idle.URL(), nil, exitOK, false, fromLine("published: stream message ")},
		{"tracing off prints no trace_id", idle.URL(), []string{"--json"}, exitOK, false, fromJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCollector(t)
			var env []string
			if tc.traced {
				env = c.env()
			}
			r := publisherWithEnv(t, env, nil, seedOriginal.args("send", append([]string{"--server", tc.url}, tc.args...)...)...)
			r.expect(t, tc.code)
			id := tc.traceID(t, r.stdout, r.stderr)
			switch {
			case !tc.traced && id != "":
				t.Fatalf("tracing off, send printed trace %q:\n%s%s", id, r.stdout, r.stderr)
			case !tc.traced:
				return
			case id == "":
				t.Fatalf("send printed no trace id:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			raw, err := hex.DecodeString(id)
			if err != nil {
				t.Fatal(err)
			}
			if !c.received(raw, []byte("send approvals.default.intent-0001")) {
				t.Errorf("the collector received no span send approvals.default.intent-0001 in trace %s", id)
			}
		})
	}
}

// fromLine is the trace id printed on the line after the line that starts
// with first, which must be stdout's first; "" when there is none.
func fromLine(first string) func(t *testing.T, stdout, stderr string) string {
	return func(t *testing.T, stdout, _ string) string {
		t.Helper()
		if !strings.HasPrefix(stdout, first) {
			t.Fatalf("stdout does not start %q:\n%s", first, stdout)
		}
		if strings.Contains(stdout, "trace") && printedTrace.FindStringSubmatch(stdout) == nil {
			t.Fatalf("stdout names a trace, but not on a line of its own:\n%s", stdout)
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		m := printedTrace.FindStringSubmatch(lines[len(lines)-1])
		if m == nil {
			return ""
		}
		return m[1]
	}
}

func fromJSON(t *testing.T, stdout, _ string) string {
	t.Helper()
	var got struct {
		Published bool   `json:"published"`
		TraceID   string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || !got.Published {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if got.TraceID != "" && !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got.TraceID) {
		t.Fatalf("trace_id %q is not 32 hex digits", got.TraceID)
	}
	return got.TraceID
}

func fromNoReceipt(t *testing.T, _, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`published as APPROVALS message \d+ in trace ([0-9a-f]{32}); no receipt: `).FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	return m[1]
}
