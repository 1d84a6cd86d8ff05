package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// receiptsFor waits until message seq has a receipt and returns its
// receipts.
func receiptsFor(t *testing.T, env *testenv.Env, seq uint64, within time.Duration) []*document.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		byseq, err := audit.ReceiptsBySeq(ctx, env.JS)
		if err == nil && len(byseq[seq]) > 0 {
			return byseq[seq]
		}
		if ctx.Err() != nil {
			t.Fatalf("no receipt for message %d within %s", seq, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantDeadLettered checks that message seq ends with one dead letter and
// one dead_lettered receipt whose reason contains why, and that the
// consumer has nothing left.
func wantDeadLettered(t *testing.T, env *testenv.Env, seq uint64, why string) *document.Receipt {
	t.Helper()
	rs := receiptsFor(t, env, seq, 20*time.Second)
	if len(rs) != 1 || rs[0].Outcome != document.OutcomeDeadLettered || rs[0].Failure == nil {
		t.Fatalf("receipts %+v, want one dead_lettered", rs)
	}
	reason := rs[0].Failure.Reason
	for _, want := range []string{why, "may or may not have been created", "sending the same approval again is safe"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the dead letter's reason %q does not say %q", reason, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dead, err := audit.DeadLetterSeqs(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dead[seq]; !ok || len(dead) != 1 {
		t.Fatalf("dead letters %v, want one for message %d", dead, seq)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := audit.Consumer(ctx, env.JS)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending == 0 && st.AckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %+v: the message is still pending", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return rs[0]
}

func TestAMessageWhoseDeliveriesRanOutWhileEveryExecutorWasDeadIsDeadLetteredByTheNextOne(t *testing.T) {
	env := testenv.Start(t)
	topo := topology.Config{AckWait: time.Second, MaxDeliver: 2, NakDelay: 50 * time.Millisecond, MaxNakDelay: 500 * time.Millisecond}
	seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
	// Two executors take the message in turn and die after the service
	// call: its budget of two deliveries is spent.
	killedExecutor(t, env, executor.AfterCall, 1, topo)
	killedExecutor(t, env, executor.AfterCall, 1, topo)
	// Nobody listens while the last delivery's AckWait runs out.
	time.Sleep(2*topo.AckWait + 500*time.Millisecond)
	env.Executor(executor.Config{ID: "exec-healthy", Topology: topo})
	rc := wantDeadLettered(t, env, seq, "deliveries ran out")
	if rc.Delivery.Delivered != 3 || rc.Failure.Attempts != 2 {
		t.Fatalf("dead-lettered on delivery %d after %d attempts, want delivery 3 after 2", rc.Delivery.Delivered, rc.Failure.Attempts)
	}
	// The healthy executor did not call the service again.
	wantCounts(t, env.Counts(), 2, 1, 1)
}

// An older version provisioned the consumer with a finite MaxDeliver (the
// server drops a message there) and a BackOff (which overrides the nak
// delays). Two deliveries are taken and never acked, as by executors that
// died; then an executor of this version starts.
func TestAConsumerProvisionedByAnOlderVersionStillDeadLettersWhatRunsOut(t *testing.T) {
	for _, c := range []struct {
		name        string
		noProvision bool
		budget      int
	}{
		{"an executor that provisions updates the consumer and counts its own budget", false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := env.JS.DeleteConsumer(ctx, topology.ApprovalsStream, topology.Consumer); err != nil {
				t.Fatal(err)
			}
			old := topology.ConsumerConfig(topology.Config{})
			old.AckWait, old.MaxDeliver, old.BackOff, old.Metadata = time.Second, 3, []time.Duration{time.Second, time.Second}, nil
			cons, err := env.JS.CreateConsumer(ctx, topology.ApprovalsStream, old)
			if err != nil {
				t.Fatal(err)
			}
			seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
			for i := 1; i <= 2; i++ {
				batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for m := range batch.Messages() {
					meta, _ := m.Metadata()
					if meta.Sequence.Stream != seq || meta.NumDelivered != uint64(i) {
						t.Fatalf("delivery %d of message %d, want %d of %d", meta.NumDelivered, meta.Sequence.Stream, i, seq)
					}
					n++
				}
				if n != 1 {
					t.Fatalf("fetch %d got %d messages: %v", i, n, batch.Error())
				}
			}
			topo := testenv.Topology
			topo.AckWait, topo.MaxDeliver = time.Second, c.budget
			env.Executor(executor.Config{ID: "exec-new", Topology: topo, NoProvision: c.noProvision})
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !c.noProvision && (info.Config.MaxDeliver != -1 || len(info.Config.BackOff) != 0 || info.Config.Metadata[topology.MetaMaxDeliver] != "2") {
				t.Fatalf("the consumer was not updated: MaxDeliver %d, BackOff %v, metadata %v",
					info.Config.MaxDeliver, info.Config.BackOff, info.Config.Metadata)
			}
			rc := wantDeadLettered(t, env, seq, "deliveries ran out")
			if rc.Delivery.Delivered != 3 {
				t.Fatalf("dead-lettered on delivery %d, want 3", rc.Delivery.Delivered)
			}
			wantCounts(t, env.Counts(), 0, 0, 0)
		})
	}
}

func TestTransientFailuresAreRetriedOnTheScheduleTheLogStatesAndTheLastIsDeadLettered(t *testing.T) {
	env := testenv.Start(t)
	topo := topology.Config{AckWait: 5 * time.Second, MaxDeliver: 4, NakDelay: 200 * time.Millisecond, MaxNakDelay: 800 * time.Millisecond}
	type event struct {
		delivered uint64
		at        time.Time
	}
	events := make(chan event, 16)
	var log testenv.Buffer
	env.Executor(executor.Config{ID: "exec-1", Topology: topo, CallTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		OnRetry: func(delivered uint64, _ error) {
			events <- event{delivered, time.Now()}
		},
		OnReceipt: func(r *document.Receipt, _ time.Duration) {
			events <- event{r.Delivery.Delivered, time.Now()}
		}})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
	var got []event
	for len(got) < topo.MaxDeliver {
		select {
		case ev := <-events:
			got = append(got, ev)
		case <-time.After(20 * time.Second):
			t.Fatalf("deliveries seen: %+v", got)
		}
	}
	budget := topology.DeadLetterBudget(topo)
	if len(budget.Delays) != topo.MaxDeliver-1 {
		t.Fatalf("budget %+v for %d deliveries", budget, topo.MaxDeliver)
	}
	const slack = 400 * time.Millisecond // the machine is shared and noisy
	for i, want := range budget.Delays {
		gap := got[i+1].at.Sub(got[i].at)
		if got[i].delivered != uint64(i+1) || gap < want-20*time.Millisecond || gap > want+slack {
			t.Errorf("delivery %d came %s after delivery %d, want %s", got[i+1].delivered, gap, got[i].delivered, want)
		}
		if line := "retry_in=" + want.String(); !strings.Contains(log.String(), line) {
			t.Errorf("the log never says %s:\n%s", line, log.String())
		}
	}
	total := got[len(got)-1].at.Sub(got[0].at)
	if total < budget.Transient-50*time.Millisecond || total > budget.Transient+2*slack {
		t.Errorf("dead-lettered %s after the first failure, want the budget's %s", total, budget.Transient)
	}
	seqs, err := audit.ReceiptsBySeq(context.Background(), env.JS)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range seqs {
		if len(rs) != 1 || rs[0].Outcome != document.OutcomeDeadLettered || rs[0].Delivery.Delivered != uint64(topo.MaxDeliver) {
			t.Fatalf("receipts %+v, want one dead_lettered on delivery %d", rs, topo.MaxDeliver)
		}
	}
}

// A message reaches the executor's pull subscription without JetStream's
// reply subject (so without a stream sequence or a delivery count): it is
// given back with a nak, not terminated and not acked.
func TestADeliveryWithoutJetStreamMetadataIsGivenBackNotTerminated(t *testing.T) {
	env := testenv.Start(t)
	pulls := make(chan string, 16)
	sub, err := env.NC.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+topology.ApprovalsStream+"."+topology.Consumer, func(m *nats.Msg) {
		select {
		case pulls <- m.Reply:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	answers, err := env.NC.SubscribeSync("test.not-an-ack-subject")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var retried atomic.Int64
	env.Executor(executor.Config{ID: "exec-1", OnRetry: func(uint64, error) { retried.Add(1) }})
	var inbox string
	select {
	case inbox = <-pulls:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor never pulled")
	}
	m := nats.NewMsg(inbox)
	m.Reply = "test.not-an-ack-subject"
	m.Data = testenv.Seed(t).Original.Envelope()
	if err := env.NC.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	answer, err := answers.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to the delivery: %v", err)
	}
	if body := string(answer.Data); !strings.HasPrefix(body, "-NAK") {
		t.Fatalf("the delivery was answered %q, want a nak", body)
	}
	// The retry is counted just after the nak is sent: wait for it.
	for deadline := time.Now().Add(10 * time.Second); retried.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if retried.Load() != 1 {
		t.Fatalf("%d retries counted, want 1", retried.Load())
	}
	wantCounts(t, env.Counts(), 0, 0, 0)
}

// The last delivery's receipt is stored but its ack never reaches the
// server; the next delivery is past the budget. The message is finished
// already: it is acked, not dead-lettered, so it never ends with both a
// created and a dead_lettered receipt. The search for that receipt skips
// the intent's receipts stored before the message and reads at most
// ReceiptScanLimit of those stored after it.
func TestAMessageOutOfDeliveriesWhoseReceiptIsStoredIsAckedNotDeadLettered(t *testing.T) {
	for _, c := range []struct {
		name   string
		before int // receipts of the intent's other messages stored before the message
		after  int // ... stored after the message, before its own receipt
		dead   bool
	}{
		{"with no other receipt of the intent", 0, 0, false},
		{"with more receipts of the intent before the message than the scan limit", 2 * executor.ReceiptScanLimit, 0, false},
		{"with receipts of the intent after the message up to the scan limit", 0, executor.ReceiptScanLimit - 1, false},
		{"past the scan limit after the message it is dead-lettered after all", 0, executor.ReceiptScanLimit, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			topo := topology.Config{AckWait: time.Second, MaxDeliver: 1, NakDelay: 50 * time.Millisecond, MaxNakDelay: 500 * time.Millisecond}
			envelope := testenv.Seed(t).Original.Envelope()
			id := document.Identify(envelope)
			others := func(from, n int) {
				for i := from; i < from+n; i++ {
					m := nats.NewMsg(subjects.Receipt("", id.IntentID))
					m.Header.Set(topology.HeaderStreamSeq, strconv.Itoa(1000+i))
					m.Header.Set(topology.HeaderOutcome, document.OutcomeReplayed)
					task := "fake-task-0001"
					body, err := json.Marshal(&document.Receipt{SchemaVersion: document.ReceiptVersion,
						ReceiptID: "receipt-other-" + strconv.Itoa(i), Outcome: document.OutcomeReplayed,
						IntentID: &id.IntentID, RequestID: &id.RequestID, ApprovalID: &id.ApprovalID, TaskID: &task,
						Counts:   &document.Counts{RequestsReceived: 1, CreatesExecuted: 1, TasksExisting: 1},
						Delivery: document.Delivery{StreamSeq: uint64(1000 + i), Delivered: 1, Attempt: "other", Executor: "exec-other"},
						IssuedAt: time.Now().UTC().Format(time.RFC3339Nano)})
					if err != nil {
						t.Error(err)
						return
					}
					m.Data = body
					if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
						t.Error(err)
						return
					}
				}
			}
			// Register before the executor starts, to undo after it stops.
			executor.NoReceiptClockAllowance(t)
			others(0, c.before)
			release := make(chan struct{})
			env.Executor(executor.Config{ID: "exec-1", Topology: topo, Fault: func(p executor.Point, _, delivered uint64, _ string) {
				switch {
				case p == executor.Taken && delivered == 1:
					others(c.before, c.after)
				case p == executor.BeforeAck && delivered == 1:
					<-release // the ack is lost
				}
			}})
			// Before the executor stops (cleanups run last first).
			t.Cleanup(func() { close(release) })
			seq := sendOnly(t, env.JS, envelope)
			settled(t, env, 2)
			outcomes, dead := outcomesOf(t, env, seq)
			want := []string{document.OutcomeCreated}
			if c.dead {
				want = append(want, document.OutcomeDeadLettered)
			}
			if !slices.Equal(outcomes, want) || (len(dead) == 1) != c.dead {
				t.Fatalf("receipts %v, dead letters %v: want receipts %v", outcomes, dead, want)
			}
			wantCounts(t, env.Counts(), 1, 1, 1)
		})
	}
}

func TestFaultSpecificationsParseOrAreRefusedWithAReason(t *testing.T) {
	for _, c := range []struct {
		spec string
		want executor.FaultSpec
		bad  bool
	}{
		{spec: "after-call:kill", want: executor.FaultSpec{Point: executor.AfterCall, Kill: true}},
		{spec: "before-ack:stall=5s:0.01", want: executor.FaultSpec{Point: executor.BeforeAck, Stall: 5 * time.Second, Probability: 0.01}},
		{spec: "taken@intent-0007:kill", want: executor.FaultSpec{Point: executor.Taken, IntentID: "intent-0007", Kill: true}},
		{spec: "taken@:kill", bad: true},
		{spec: "nowhere:kill", bad: true},
		{spec: "taken:explode", bad: true},
		{spec: "taken:kill:2", bad: true},
		{spec: "taken", bad: true},
	} {
		name := c.spec + " parses"
		if c.bad {
			name = c.spec + " is refused"
		}
		t.Run(name, func(t *testing.T) {
			got, err := executor.ParseFault(c.spec)
			if c.bad {
				if !errors.Is(err, executor.ErrFaultSpec) {
					t.Fatalf("err %v, want ErrFaultSpec", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// A fault for one intent fires on every delivery of that intent and never
// on another's.
func TestAFaultForOneIntentFiresOnEachOfItsDeliveriesOnly(t *testing.T) {
	f, err := executor.ParseFault("taken@intent-0007:stall=50ms")
	if err != nil {
		t.Fatal(err)
	}
	hook := executor.Faults([]executor.FaultSpec{f}, testenv.Logger())
	took := func(intent string) time.Duration {
		start := time.Now()
		hook(executor.Taken, 1, 1, intent)
		return time.Since(start)
	}
	for i := range 3 {
		if d := took("intent-0007"); d < 50*time.Millisecond {
			t.Fatalf("delivery %d of the intent did not stall", i+1)
		}
	}
	if d := took("intent-0008"); d >= 50*time.Millisecond {
		t.Fatalf("another intent's delivery stalled %s", d)
	}
}
