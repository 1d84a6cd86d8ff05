package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// scrape reads a process's /metrics into "name{labels}" -> value, as the
// text exposition format writes them.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body, err := proctest.Get("http://" + addr + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", code, err)
	}
	return parseMetrics(t, body)
}

func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("unreadable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("unreadable metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// ready reports whether the process at addr answers /readyz with 200.
func ready(addr string) bool {
	code, _, err := proctest.Get("http://" + addr + "/readyz")
	return err == nil && code == http.StatusOK
}

func TestMetricsShowTwoOneOneAfterServeSendSend(t *testing.T) {
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	addr := fmt.Sprintf("127.0.0.1:%d", httpPort)

	cmd := exec.Command(os.Args[0], "serve", "--embedded", "--insecure-allow-unsigned", "--data", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", natsPort), "--http", addr, "--id", "exec-metrics",
		"--log-format", "json")
	cmd.Env = append(os.Environ(), asMain+"=1")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", logs.String())
		}
	})
	waitFor(t, 30*time.Second, "serve --embedded to be ready", func() bool { return ready(addr) })

	if code, body, err := proctest.Get("http://" + addr + "/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}
	if code, body, err := proctest.Get("http://" + addr + "/readyz?verbose"); err != nil || code != 200 ||
		!strings.Contains(body, "[+]nats ok") || !strings.Contains(body, "[+]consumer ok") || !strings.Contains(body, "[+]store ok") {
		t.Errorf("/readyz?verbose: %d %q %v", code, body, err)
	}
	before := scrape(t, addr)
	if before["sendtwice_requests_received"] != 0 || before["sendtwice_tasks_existing"] != 0 {
		t.Fatalf("a fresh service counts %v", before)
	}

	// Send the seed approval twice, from two separate publisher processes.
	s := testenv.Seed(t)
	file := filepath.Join(dir, "envelope.json")
	if err := os.WriteFile(file, s.Original.Envelope(), 0o600); err != nil {
		t.Fatal(err)
	}
	var task string
	for i, want := range []string{document.OutcomeCreated, document.OutcomeReplayed} {
		send := exec.Command(os.Args[0], sendCommand, "--server", url, "--envelope", file, "--json")
		send.Env = append(os.Environ(), asMain+"=1")
		var out, errOut bytes.Buffer
		send.Stdout, send.Stderr = &out, &errOut
		if err := send.Run(); err != nil {
			t.Fatalf("send %d: %v\n%s", i+1, err, errOut.String())
		}
		rc, err := document.DecodeReceipt(bytes.TrimSpace(out.Bytes()))
		if err != nil || rc.Outcome != want || rc.TaskID == nil {
			t.Fatalf("send %d: receipt %+v, %v; want %s", i+1, rc, err, want)
		}
		if task == "" {
			task = *rc.TaskID
		} else if *rc.TaskID != task {
			t.Fatalf("the replay names task %s, the first receipt %s", *rc.TaskID, task)
		}
	}

	got := scrape(t, addr)
	want := map[string]float64{
		"sendtwice_requests_received":                                2,
		"sendtwice_creates_executed":                                 1,
		"sendtwice_tasks_existing":                                   1,
		`sendtwice_receipts_total{outcome="created"}`:                1,
		`sendtwice_receipts_total{outcome="replayed"}`:               1,
		`sendtwice_receipts_total{outcome="idempotency_conflict"}`:   0,
		`sendtwice_receipts_total{outcome="rejected"}`:               0,
		`sendtwice_receipts_total{outcome="dead_lettered"}`:          0,
		`sendtwice_gate_rejections_total{check="capability"}`:        0,
		`sendtwice_gate_rejections_total{check="request_binding"}`:   0,
		"sendtwice_redeliveries_total":                               0,
		"sendtwice_retries_total":                                    0,
		"sendtwice_processing_seconds_count":                         2,
		`sendtwice_processing_seconds_bucket{le="+Inf"}`:             2,
		`sendtwice_gate_rejections_total{check="candidate_binding"}`: 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	t.Logf("after serve, send, send: requests %v, creates %v, tasks %v",
		got["sendtwice_requests_received"], got["sendtwice_creates_executed"], got["sendtwice_tasks_existing"])
	waitFor(t, 20*time.Second, "the consumer lag to read 0", func() bool {
		v, ok := scrape(t, addr)["sendtwice_consumer_lag"]
		return ok && v == 0
	})

	// SIGTERM: the process drains and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("serve ended with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit within 20 s of SIGTERM")
	}

	// One JSON log line per receipt, at info level, with the intent id, the
	// outcome, the task id and the delivery count.
	var receipts []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if rec["msg"] == "receipt" {
			receipts = append(receipts, rec)
		}
	}
	if len(receipts) != 2 {
		t.Fatalf("%d receipt log lines, want 2", len(receipts))
	}
	for i, outcome := range []string{document.OutcomeCreated, document.OutcomeReplayed} {
		r := receipts[i]
		if r["level"] != "INFO" || r["outcome"] != outcome || r["intent_id"] != "intent-0001" ||
			r["task_id"] != task || r["delivered"] != float64(1) || r["executor"] != "exec-metrics" {
			t.Errorf("receipt log line %d: %v", i+1, r)
		}
	}
}

func TestServeRefusesReplicasItCannotHave(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--embedded", "--insecure-allow-unsigned", "--replicas", "3"},
		{"serve", "--server", "nats://127.0.0.1:1", "--insecure-allow-unsigned", "--replicas", "0"},
		{"serve", "--server", "nats://127.0.0.1:1", "--insecure-allow-unsigned", "--replicas", "7"},
	} {
		var errOut bytes.Buffer
		err := run(context.Background(), args, io.Discard, &errOut)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
