package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func wantCounts(t testing.TB, got provider.Counts, requests, creates, tasks int64) {
	t.Helper()
	if got != (provider.Counts{RequestsReceived: requests, CreatesExecuted: creates, TasksExisting: tasks}) {
		t.Fatalf("counters %+v, want %d, %d, %d", got, requests, creates, tasks)
	}
}

func TestTheSameApprovalSentTwiceIsCreatedThenReplayed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	first := env.Send(s.Original.Envelope())
	second := env.Send(s.Original.Envelope())
	if first.Outcome != document.OutcomeCreated || second.Outcome != document.OutcomeReplayed {
		t.Fatalf("outcomes %s then %s, want created then replayed", first.Outcome, second.Outcome)
	}
	if *first.TaskID != *second.TaskID {
		t.Fatalf("task ids %s and %s differ", *first.TaskID, *second.TaskID)
	}
	for _, r := range []*document.Receipt{first, second} {
		if want := env.Stack.Store.ID(); r.StoreID == nil || *r.StoreID != want {
			t.Fatalf("receipt %s names store %v, want the service's store %s", r.ReceiptID, r.StoreID, want)
		}
		if at, err := time.Parse(time.RFC3339Nano, r.Delivery.StoredAt); err != nil || time.Since(at) > time.Minute {
			t.Fatalf("receipt %s says its message was stored at %q, want the time the stream stored it", r.ReceiptID, r.Delivery.StoredAt)
		}
	}
	if first.Delivery.StreamSeq == second.Delivery.StreamSeq {
		t.Fatal("the second send was de-duplicated by the stream; it must reach the service")
	}
	if c := second.Counts; c == nil || *c != (document.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1}) {
		t.Fatalf("receipt counts %+v, want 2, 1, 1", second.Counts)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}

func TestAGateRejectionIsTerminatedAndNeverReachesTheService(t *testing.T) {
	env := testenv.Start(t)
	var mu sync.Mutex
	byOutcome, redeliveries := map[string]int{}, 0
	env.Executor(executor.Config{ID: "exec-1", OnReceipt: func(r *document.Receipt, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		byOutcome[r.Outcome]++
		if r.Delivery.Delivered > 1 {
			redeliveries++
		}
	}})
	s := testenv.Seed(t)
	for _, c := range s.TamperedCases() {
		t.Run(c.Name+" is rejected at "+c.Check, func(t *testing.T) {
			rc := env.Send(c.Envelope)
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != c.Check {
				t.Fatalf("receipt %+v, want rejected at %s", rc, c.Check)
			}
			if rc.Counts != nil || rc.TaskID != nil {
				t.Fatalf("a rejected receipt names counts or a task: %+v", rc)
			}
		})
	}
	wantCounts(t, env.Counts(), 0, 0, 0)
	// Wait past AckWait: a terminated message must not come back.
	time.Sleep(testenv.Topology.AckWait + 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := audit.Consumer(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Redelivered != 0 || st.AckPending != 0 || st.Pending != 0 {
		t.Fatalf("consumer %+v: a rejected message is pending or was redelivered", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if redeliveries != 0 || byOutcome[document.OutcomeRejected] != len(s.TamperedCases()) {
		t.Fatalf("executor saw %d redeliveries and %v", redeliveries, byOutcome)
	}
	wantCounts(t, env.Counts(), 0, 0, 0)
}

func TestADroppedReplyComesBackAsReplayed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	if _, err := env.Service.ArmFault(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	rc := env.Send(s.Original.Envelope())
	if rc.Outcome != document.OutcomeReplayed || rc.Delivery.Delivered < 2 {
		t.Fatalf("receipt %s on delivery %d, want replayed on a redelivery", rc.Outcome, rc.Delivery.Delivered)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}

func TestAReceiptStoredButItsAckLostComesBackAsReplayed(t *testing.T) {
	env := testenv.Start(t)
	var once sync.Once
	lost, release := make(chan struct{}), make(chan struct{})
	env.Executor(executor.Config{ID: "exec-1", Fault: func(p executor.Point, _, _ uint64, _ string) {
		if p == executor.BeforeAck {
			once.Do(func() {
				// The receipt is stored; the ack never reaches the server.
				close(lost)
				<-release
			})
		}
	}})
	t.Cleanup(func() { close(release) })
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := env.JS
	sent := sendOnly(t, js, s.Original.Envelope())
	<-lost
	env.Executor(executor.Config{ID: "exec-2"})
	// Two receipts for one stream message: created (ack lost), then replayed.
	var outcomes []string
	for len(outcomes) < 2 {
		byseq, err := audit.ReceiptsBySeq(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = outcomes[:0]
		for _, r := range byseq[sent] {
			outcomes = append(outcomes, r.Outcome)
		}
		if ctx.Err() != nil {
			t.Fatalf("receipts for message %d: %v", sent, outcomes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if outcomes[0] != document.OutcomeCreated || outcomes[1] != document.OutcomeReplayed {
		t.Fatalf("receipts %v, want created then replayed", outcomes)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}

func sendOnly(t testing.TB, js jetstream.JetStream, envelope []byte) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := envelope
	id := document.Identify(m)
	ack, err := js.Publish(ctx, subjects.Approval("", id.IntentID), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func TestWithTheServiceDownAMessageIsDeadLettered(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", CallTimeout: 200 * time.Millisecond})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	s := testenv.Seed(t)
	rc := env.Send(s.Original.Envelope())
	if rc.Outcome != document.OutcomeDeadLettered || rc.Failure == nil {
		t.Fatalf("receipt %+v, want dead_lettered with a reason", rc)
	}
	if rc.Failure.Attempts != int64(testenv.Topology.MaxDeliver) {
		t.Fatalf("dead-lettered after %d attempts, want MaxDeliver = %d", rc.Failure.Attempts, testenv.Topology.MaxDeliver)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dead, err := audit.DeadLetterSeqs(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dead[rc.Delivery.StreamSeq]; !ok || len(dead) != 1 {
		t.Fatalf("dead letters %v, want one for message %d", dead, rc.Delivery.StreamSeq)
	}
	// The executor keeps serving once the service is back.
	env.RestartService("provider")
	if rc := env.Send(s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("after the service came back: %s, want created", rc.Outcome)
	}
}

func TestPoisonMessagesAreRejectedWithReasonsAndTheExecutorKeepsServing(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	valid := string(s.Original.Envelope())
	for _, c := range []struct {
		name, path string
		body       []byte
	}{
		{"random bytes", "$", []byte{0x8f, 0x00, 0xff, 0x13}},
		{"truncated JSON", "$", []byte(valid[:len(valid)/2])},
		{"a payload over the gate's limit (the stream takes some more, for headers)", "$", []byte(strings.Replace(valid, `"kind":"commitment"`, `"kind":"`+strings.Repeat("x", document.MaxEnvelopeBytes+4<<10)+`"`, 1))},
		{"an absurd intent id", "$.request.intent_id", []byte(strings.Replace(valid, `"intent_id":"intent-0001"`, `"intent_id":"`+strings.Repeat("\u202e../", 60)+`"`, 1))},
		{"an empty message", "$", []byte{}},
	} {
		t.Run(c.name+" is rejected at the envelope check with a reason", func(t *testing.T) {
			rc := env.Send(c.body)
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != "envelope" {
				t.Fatalf("receipt %+v, want rejected at envelope", rc)
			}
			if rc.Rejection.Reason == "" || !strings.HasPrefix(rc.Rejection.Path, c.path) {
				t.Fatalf("rejection %+v, want a reason and a path under %s", rc.Rejection, c.path)
			}
		})
	}
	if rc := env.Send(s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("after the poison messages: %s, want created", rc.Outcome)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
}

func TestAMessageRefusedForAVeryLongMemberNameGetsAReceiptThatDecodes(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	var envelope map[string]any
	if err := json.Unmarshal(testenv.Seed(t).Original.Envelope(), &envelope); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 6000) // 12,000 bytes, a name no receipt field may hold whole
	envelope["request"].(map[string]any)[long] = 1
	body, err := json.Marshal(envelope)
	if err != nil {
		t.Fatal(err)
	}
	rc := env.Send(body)
	if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != "envelope" {
		t.Fatalf("receipt %+v, want rejected at envelope", rc)
	}
	if len(rc.Rejection.Path) > document.MaxTextBytes || !strings.HasPrefix(rc.Rejection.Path, "$.request.é") || !utf8.ValidString(rc.Rejection.Path) {
		t.Fatalf("rejection path of %d bytes: %.80q…", len(rc.Rejection.Path), rc.Rejection.Path)
	}
	// send reads the receipt with the strict decoder: it decodes.
	wantCounts(t, env.Counts(), 0, 0, 0)
}

// "café" in NFC and in NFD, each approved as written: the first is created,
// the second is rejected at the gate naming request.intent_id and never
// reaches the service. One intent, one task.
func TestAnIntentIDSpelledTwiceInUnicodeMakesOneTask(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	var rcs []*document.Receipt
	for _, intent := range []string{"caf\u00e9", "cafe\u0301"} {
		a, err := scenario.ApproveAsWritten(scenario.Candidate(), "task-request-cafe", intent, "補上通知設定的檢查項目", "approval-cafe")
		if err != nil {
			t.Fatal(err)
		}
		rcs = append(rcs, env.Send(a.Envelope()))
	}
	if rcs[0].Outcome != document.OutcomeCreated {
		t.Fatalf("the NFC spelling: %s, want created", rcs[0].Outcome)
	}
	rj := rcs[1].Rejection
	if rcs[1].Outcome != document.OutcomeRejected || rj == nil || rj.Check != gate.CheckEnvelope ||
		rj.Path != "$.request.intent_id" || !strings.Contains(rj.Reason, "NFC") {
		t.Fatalf("the NFD spelling: %s %+v, want rejected at envelope, $.request.intent_id, saying NFC", rcs[1].Outcome, rj)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
}

// TestTheExecutorSendsTheRequestItsApprovalCovers checks the request bytes
// an executor hands to the task service: the canonical form of the
// envelope's request, which hashes to the approved digest.
func TestTheExecutorSendsTheRequestItsApprovalCovers(t *testing.T) {
	s := testenv.Seed(t)
	v, err := gate.CheckBindings(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	req := executor.CallRequest(v, topology.CallRef(1, 1, "a"))
	d, err := canon.DigestExact(req.Request)
	if err != nil || d != req.RequestDigest || d != v.Approval.Request.Digest {
		t.Fatalf("request digests to %s (%v); the call says %s, the approval %s", d, err, req.RequestDigest, v.Approval.Request.Digest)
	}
	call, err := provider.RequestFor(req.Request)
	if err != nil || call.IntentID != req.IntentID || call.RequestID != req.RequestID || call.Task.Title != req.Task.Title {
		t.Fatalf("the service reads %+v (%v) from the request of %+v", call, err, req)
	}
}

// changeConsumer changes the executors' consumer behind provisioning's
// back, as a role that may update consumers but not the record could.
func changeConsumer(t *testing.T, env *testenv.Env, change func(*jetstream.ConsumerConfig)) {
	t.Helper()
	testenv.ChangeConsumer(t, env.JS, change)
}

// newExecutor makes an executor on a connection of its own, as
// testenv.Env.Executor does, without starting it.
func newExecutor(t *testing.T, env *testenv.Env, cfg executor.Config) (*executor.Executor, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(env.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if reflect.ValueOf(cfg.Topology).IsZero() {
		cfg.Topology = testenv.Topology
	}
	if cfg.Logger == nil {
		cfg.Logger = env.Log
	}
	cfg.TaskService = provider.NewClient(nc).TaskService()
	cfg.Gate = &gate.Checker{AllowUnsigned: true}
	ex, err := executor.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ex, nc
}

func TestAnExecutorRefusesAtStartAConsumerChangedSinceItWasProvisioned(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*testing.T, *testenv.Env)
		// says lists the differences the refusal must name; none means the
		// executor must start.
		says        []string
		noProvision bool
	}{
		{name: "a consumer as provisioned is consumed from", noProvision: true},
		{name: "a consumer rewritten to filter nothing with a budget of one is refused, naming both fields",
			change: func(t *testing.T, env *testenv.Env) {
				changeConsumer(t, env, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
			},
			says: []string{`consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`,
				"consumer executor: max_deliver: expected -1, found 1"},
			noProvision: true},
		{name: "a consumer whose ack wait, ack pending limit and budget were changed is refused",
			change: func(t *testing.T, env *testenv.Env) {
				changeConsumer(t, env, func(cc *jetstream.ConsumerConfig) {
					cc.AckWait, cc.MaxAckPending = time.Hour, 1
					cc.Metadata[topology.MetaMaxDeliver] = "1"
				})
			},
			says: []string{"ack_wait: expected 2s, found 1h0m0s", "max_ack_pending: expected 4096, found 1",
				`metadata.sendtwice.max_deliver: expected "4", found "1"`},
			noProvision: true},
		{name: "a consumer provisioned by an older version, without a record, is refused against what the executor's settings provision",
			change: func(t *testing.T, env *testenv.Env) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := env.JS.DeleteKeyValue(ctx, topology.RecordBucket); err != nil {
					t.Fatal(err)
				}
				changeConsumer(t, env, func(cc *jetstream.ConsumerConfig) {
					cc.AckWait, cc.MaxDeliver, cc.BackOff, cc.Metadata = time.Second, 3, []time.Duration{time.Second, time.Second}, nil
				})
			},
			says: []string{"no record of what was provisioned", "max_deliver: expected -1, found 3", "backoff: expected none, found [1s 1s]",
				`metadata.sendtwice.max_deliver: expected "4", found none`},
			noProvision: true},
		{name: "an executor that provisions sets a rewritten consumer right and consumes",
			change: func(t *testing.T, env *testenv.Env) {
				changeConsumer(t, env, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			if c.change != nil {
				c.change(t, env)
			}
			ex, _ := newExecutor(t, env, executor.Config{ID: "exec-check", NoProvision: c.noProvision})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stop, err := ex.Start(ctx)
			if len(c.says) == 0 {
				if err != nil {
					t.Fatalf("the executor did not start: %v", err)
				}
				if err := stop(); err != nil {
					t.Fatalf("stop: %v", err)
				}
				return
			}
			if err == nil {
				_ = stop()
				t.Fatal("the executor started on a consumer changed since it was provisioned")
			}
			if !errors.Is(err, executor.ErrConsumerChanged) {
				t.Fatalf("start: %v; want ErrConsumerChanged", err)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q: %v", w, err)
				}
			}
		})
	}
}

func TestARunningExecutorStopsTakingDeliveriesOnceItsConsumerIsChanged(t *testing.T) {
	env := testenv.Start(t)
	var log testenv.Buffer
	ex, nc := newExecutor(t, env, executor.Config{ID: "exec-watch", NoProvision: true, ConsumerCheckInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- ex.Run(context.Background(), ready) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the executor stopped at start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the executor did not start")
	}
	s := testenv.Seed(t)
	if rc := env.Send(s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("outcome %s before the change", rc.Outcome)
	}

	changeConsumer(t, env, func(cc *jetstream.ConsumerConfig) {
		cc.MaxDeliver = 1
		cc.Metadata[topology.MetaMaxDeliver] = "1"
	})
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the executor kept running on a changed consumer")
	}
	if !errors.Is(err, executor.ErrConsumerChanged) || !strings.Contains(err.Error(), "max_deliver: expected -1, found 1") {
		t.Fatalf("Run returned %v; want ErrConsumerChanged naming max_deliver", err)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), `metadata.sendtwice.max_deliver: expected \"4\", found \"1\"`) {
		t.Fatalf("no ERROR naming the differences in the log:\n%s", log.String())
	}

	// The connection is drained after Run, as serve does, and closed (a
	// drain only starting could still take a delivery for a pull in
	// flight); nothing takes an approval sent now: it waits in the stream.
	if err := natsconn.Drain(nc, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := env.JS.Publish(ctx, subjects.Approval("", "intent-0001"), s.Original.Envelope()); err != nil {
		t.Fatal(err)
	}
	// The consumer counts the new message a moment after the stream stored
	// it; once it does, and a while later still, nobody has taken it.
	for _, wait := range []time.Duration{0, 300 * time.Millisecond} {
		time.Sleep(wait)
		st, err := audit.Consumer(ctx, env.JS)
		for err == nil && st.Pending == 0 && st.AckPending == 0 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			st, err = audit.Consumer(ctx, env.JS)
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != 1 || st.AckPending != 0 || st.Waiting != 0 {
			t.Fatalf("consumer pending %d, ack pending %d, pulls waiting %d: want the approval untaken and no executor pulling",
				st.Pending, st.AckPending, st.Waiting)
		}
	}
}

func TestStartReturnsOnceConsumingAndStopWaitsForTheRun(t *testing.T) {
	env := testenv.Start(t)
	ex, nc := newExecutor(t, env, executor.Config{ID: "exec-start"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := ex.Start(ctx)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	// Asked on the executor's own connection, after its pull request; the
	// server registers a pull request in a queue of its own, so the count
	// may take a moment to show it.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	var waiting int
	for deadline := time.Now().Add(5 * time.Second); waiting == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiting = info.NumWaiting
	}
	if waiting == 0 {
		t.Errorf("after Start the consumer has no pull waiting; want the executor's")
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("a second stop: %v", err)
	}
}

func TestStartReportsAnExecutorThatCannotConsume(t *testing.T) {
	env := testenv.Start(t)
	if err := env.JS.DeleteStream(context.Background(), topology.ApprovalsStream); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExecutor(t, env, executor.Config{ID: "exec-start", NoProvision: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := ex.Start(ctx)
	if err == nil || stop != nil || !strings.Contains(err.Error(), "stopped at start") {
		t.Fatalf("Start without a consumer: %v (stop %v); want an error saying it stopped at start", err, stop != nil)
	}
}
