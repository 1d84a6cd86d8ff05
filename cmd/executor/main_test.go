package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
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

func TestDemoExitsZeroAndPrintsTheTwoOneOneRow(t *testing.T) {
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo"}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo failed: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	table := out.String()
	expectLines(t, "table", table, "replayed fake-task-0001", "2, 1, 1", "idempotency_conflict", "3, 1, 1", "replayed fake-task-0001 (task deleted)", "4, 1, 0", "created, created", "2, 2, 2", "rejected at")
	if strings.Contains(table, "DIFFERS") {
		t.Errorf("a row differs:\n%s", table)
	}
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
