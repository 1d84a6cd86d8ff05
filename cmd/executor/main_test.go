package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/proctest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// The test binary doubles as the executor command: a test runs it as a
// separate OS process with this variable set.
const asMain = "SENDTWICE_EXECUTOR_MAIN"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	if os.Getenv(asMain) == "1" {
		serveKnobFlags = knobFlags
		main()
	}
	os.Exit(m.Run())
}

// syncBuffer collects a child process's output.
type syncBuffer = testenv.Buffer

// process is an executor running as its own OS process.
type process struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed when the process has ended
	err    error         // how it ended, once exited is closed
}

// startExecutor runs "executor serve" against url in a new process, with
// the fast topology of the tests.
func startExecutor(t *testing.T, url, id string, extra ...string) *process {
	t.Helper()
	args := []string{"serve", "--server", url, "--insecure-allow-unsigned", "--id", id, "--ack-wait", "2s", "--max-deliver", "4",
		"--call-timeout", "1s", "--log-level", "warn"}
	cmd := exec.Command(os.Args[0], append(args, extra...)...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	p := &process{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting an executor process: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("executor %s output:\n%s", id, p.out.String())
		}
	})
	return p
}

// restartRun is how a run through a restart of the task service's server
// ended.
type restartRun struct {
	restartedAfter int64             // created receipts stored when the server restarted
	outcomes       map[string]int    // first receipts by outcome
	redelivered    int               // first receipts written on a redelivery
	dead           map[uint64]string // dead-lettered messages
}

// publishThroughARestart spreads envelopes over env's pipeline, restarts
// the server (restart, named server) once a few receipts are in, and waits
// up to within for every message's receipts.
func publishThroughARestart(ctx context.Context, t *testing.T, env *testenv.Env, envelopes [][]byte, server string, restart func(), within time.Duration) restartRun {
	t.Helper()
	pub := publishSpread(ctx, env.JS, envelopes, 50*time.Millisecond)
	run := restartRun{restartedAfter: restartMidRun(ctx, t, env.JS, len(envelopes), server, restart), outcomes: map[string]int{}}
	if err := <-pub.done; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	all := pub.sent()
	byseq := awaitReceipts(t, env, all, within)
	// ctx bounds the run up to the restart; the receipts may take longer
	// (within), so the dead letters are read with a bound of their own.
	deadCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead, err := audit.DeadLetterSeqs(deadCtx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	run.dead = dead
	for _, seq := range all {
		// The first terminal receipt: an in_doubt one ends nothing.
		i := slices.IndexFunc(byseq[seq], func(rc *document.Receipt) bool { return document.Terminal(rc.Outcome) })
		if i < 0 {
			continue
		}
		rc := byseq[seq][i]
		run.outcomes[rc.Outcome]++
		if rc.Delivery.Delivered > 1 {
			run.redelivered++
		}
	}
	return run
}

// restartMidRun waits until the first few receipts of a batch of size batch
// say created, restarts the task service with restart, and fails the test
// if every receipt of the batch was in by then (named for the service, as
// server): the restart was not mid-run. It returns how many said created
// when the service was back.
func restartMidRun(ctx context.Context, t *testing.T, js jetstream.JetStream, batch int, server string, restart func()) int64 {
	t.Helper()
	for {
		n, err := audit.CountReceipts(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		if n[document.OutcomeCreated] >= 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no receipts before the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	restart()
	restartedAfter, err := audit.CountReceipts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if restartedAfter[document.OutcomeCreated] >= int64(batch) {
		t.Fatalf("all %d receipts were in when %s was back: the restart was not mid-run", batch, server)
	}
	return restartedAfter[document.OutcomeCreated]
}

// runCLI runs the executor's command line with args in this process and
// returns what it printed on stdout and on stderr.
func runCLI(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// writeTestFile writes content to a file name, readable by its owner only,
// in a directory of its own that the test removes; it returns the path.
func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

func writeFileIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// expectLines fails the test, naming what printed out, for each of wants
// that out does not contain.
func expectLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// generateBatch makes approvals 1 to n of f under prefix: their envelopes
// and, in the same order, their intent ids.
func generateBatch(t *testing.T, f scenario.For, prefix string, n int) (envelopes [][]byte, intents []string) {
	t.Helper()
	cand := scenario.Candidate()
	for i := 1; i <= n; i++ {
		a, err := f.Generate(cand, prefix, i)
		if err != nil {
			t.Fatal(err)
		}
		envelopes = append(envelopes, a.Envelope())
		intents = append(intents, document.Identify(a.Envelope()).IntentID)
	}
	return envelopes, intents
}

func receiptFor(t *testing.T, js jetstream.JetStream, intent string, seq uint64) *testenv.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := testenv.WaitReceipt(ctx, js, "", intent, seq)
	if err != nil {
		t.Fatalf("waiting for the receipt of message %d: %v", seq, err)
	}
	return rc
}

func TestAnExecutorKilledBetweenTheCallAndTheAckLeadsToAReplay(t *testing.T) {
	s := testenv.Seed(t)
	for _, point := range []string{"after-call", "after-receipt", "before-ack"} {
		t.Run("killed "+point+", the redelivery is replayed", func(t *testing.T) {
			env := testenv.Start(t)
			first := startExecutor(t, env.URL(), "exec-doomed", "--fault", point+":kill")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sent, err := testenv.Publish(ctx, env.JS, s.Original.Envelope())
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-first.exited:
				var ee *exec.ExitError
				if !errors.As(first.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the executor ended with %v, want SIGKILL:\n%s", first.err, first.out.String())
				}
			case <-ctx.Done():
				t.Fatalf("the executor was not killed at %s", point)
			}
			if c := env.Counts(); c.CreatesExecuted != 1 || c.RequestsReceived != 1 {
				t.Fatalf("after the kill the service counts %+v; the call should have happened once", c)
			}
			startExecutor(t, env.URL(), "exec-2")
			// The last receipt for the message is the replay by exec-2.
			rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq)
			if point != "after-call" {
				if rc.Outcome != document.OutcomeCreated || rc.Delivery.Executor != "exec-doomed" {
					t.Fatalf("first receipt %s by %s, want created by the killed instance", rc.Outcome, rc.Delivery.Executor)
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				byseq, err := audit.ReceiptsBySeq(ctx, env.JS)
				if err != nil {
					t.Fatal(err)
				}
				rs := byseq[sent.StreamSeq]
				if n := len(rs); n > 0 && rs[n-1].Outcome == document.OutcomeReplayed {
					if rs[n-1].Delivery.Delivered < 2 || rs[n-1].Delivery.Executor != "exec-2" {
						t.Fatalf("replay %+v, want a redelivery by exec-2", rs[n-1].Delivery)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no replayed receipt; receipts: %d", len(rs))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
				t.Fatalf("counters %+v, want 2, 1, 1", c)
			}
		})
	}
}

func TestThreeExecutorProcessesShareOneConsumer(t *testing.T) {
	const distinct, resends = 700, 300
	env := testenv.Start(t)
	for i := 1; i <= 3; i++ {
		startExecutor(t, env.URL(), fmt.Sprintf("exec-%d", i), "--concurrency", "64")
	}
	cand := scenario.Candidate()
	envelopes := make([][]byte, 0, distinct+resends)
	for i := 1; i <= distinct; i++ {
		a, err := scenario.Generate(cand, "load", i)
		if err != nil {
			t.Fatal(err)
		}
		envelopes = append(envelopes, a.Envelope())
	}
	for i := 0; i < resends; i++ {
		envelopes = append(envelopes, envelopes[(i*7)%distinct]) // resend an earlier approval
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Publish from 8 concurrent senders.
	seqs := make(chan uint64, len(envelopes))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(envelopes); i += 8 {
				sent, err := testenv.Publish(ctx, env.JS, envelopes[i])
				if err != nil {
					errs <- err
					return
				}
				seqs <- sent.StreamSeq
			}
		}(w)
	}
	wg.Wait()
	close(seqs)
	close(errs)
	for err := range errs {
		t.Fatalf("publishing: %v", err)
	}
	published := map[uint64]bool{}
	for s := range seqs {
		published[s] = true
	}
	if len(published) != distinct+resends {
		t.Fatalf("%d distinct stream messages, want %d: a resend was de-duplicated", len(published), distinct+resends)
	}
	// Wait until every published message has a terminal receipt.
	var byseq map[uint64][]*document.Receipt
	for {
		var err error
		byseq, err = audit.ReceiptsBySeq(ctx, env.JS)
		if err != nil {
			t.Fatal(err)
		}
		if len(byseq) >= len(published) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d messages have receipts", len(byseq), len(published))
		}
		time.Sleep(250 * time.Millisecond)
	}
	outcomes := map[string]int{}
	executors := map[string]int{}
	taskOf := map[string]string{}
	for seq := range published {
		rs := byseq[seq]
		if len(rs) == 0 {
			t.Fatalf("message %d has no receipt", seq)
		}
		r := rs[0]
		outcomes[r.Outcome]++
		executors[r.Delivery.Executor]++
		if r.TaskID == nil || r.IntentID == nil {
			t.Fatalf("receipt without task or intent: %+v", r)
		}
		if prev, ok := taskOf[*r.IntentID]; ok && prev != *r.TaskID {
			t.Fatalf("intent %s names tasks %s and %s", *r.IntentID, prev, *r.TaskID)
		}
		taskOf[*r.IntentID] = *r.TaskID
	}
	c := env.Counts()
	t.Logf("receipts by outcome %v; by executor %v; counters %+v", outcomes, executors, c)
	if outcomes[document.OutcomeCreated] != distinct || outcomes[document.OutcomeReplayed] != resends {
		t.Fatalf("outcomes %v, want %d created and %d replayed", outcomes, distinct, resends)
	}
	if c.TasksExisting != distinct || c.CreatesExecuted != distinct || len(taskOf) != distinct {
		t.Fatalf("counters %+v and %d intents, want %d tasks, one per distinct intent", c, len(taskOf), distinct)
	}
	if c.RequestsReceived < int64(distinct+resends) {
		t.Fatalf("the service received %d requests, fewer than the %d messages", c.RequestsReceived, distinct+resends)
	}
	if len(executors) < 2 {
		t.Errorf("only %v handled messages; the consumer was not shared", executors)
	}
}

func TestServeDrainsAndExitsCleanlyOnSIGTERM(t *testing.T) {
	env := testenv.Start(t)
	p := startExecutor(t, env.URL(), "exec-1")
	sendSeedCreated(t, env)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("serve ended with %v after SIGTERM, want exit status 0:\n%s", p.err, p.out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit within 15 s of SIGTERM")
	}
}

func TestVersionPrintsTheModuleVersionAndExitsZero(t *testing.T) {
	out, errOut, err := runCLI(context.Background(), "--version")
	if code := exitCode(err); code != 0 {
		t.Fatalf("exit %d (%v): %s", code, err, errOut)
	}
	if !strings.HasPrefix(out, "executor ") || len(strings.TrimSpace(out)) <= len("executor") {
		t.Fatalf("printed %q", out)
	}
}

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
	var task string
	for i, want := range []string{document.OutcomeCreated, document.OutcomeReplayed} {
		rc := sendByProcess(t, url, s.Original.Envelope())
		if rc.Outcome != want || rc.TaskID == nil {
			t.Fatalf("send %d: receipt %+v; want %s", i+1, rc, want)
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
		_, _, err := runCLI(context.Background(), args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
