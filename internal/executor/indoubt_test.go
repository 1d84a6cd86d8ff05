package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/taskservice"
)

// inDoubtTopology spends the budget on the first failure: only a delivery
// left out of the budget is ever delivered again.
var inDoubtTopology = topology.Config{AckWait: 2 * time.Second, MaxDeliver: 1, NakDelay: 50 * time.Millisecond, MaxNakDelay: 5 * time.Second}

// A service that holds the key in doubt for two seconds: the first
// delivery stores an in_doubt receipt saying until when, the message comes
// back after that time outside the budget (one delivery, spent by the
// first), and the next delivery creates. A send whose wait ends meanwhile
// says until when the message is in doubt; a wait after it answers
// created.
func TestAKeyInDoubtStoresAnInDoubtReceiptAndTheMessageComesBackWhenTheDoubtIsOver(t *testing.T) {
	env := testenv.Start(t)
	var mu sync.Mutex
	var until time.Time
	var calls []time.Time
	svc := taskservice.Func(func(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		calls = append(calls, now)
		if until.IsZero() {
			until = now.Add(2 * time.Second)
		}
		if now.Before(until) {
			return taskservice.Result{}, taskservice.InDoubt(errors.New("an earlier POST for this key timed out"), until)
		}
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1"}, nil
	})
	env.Executor(executor.Config{ID: "exec-doubt", TaskService: svc, Topology: inDoubtTopology})
	client := send.NewClient(env.JS)
	sent, _, err := client.Send(context.Background(), send.Unchecked(testenv.Seed(t).Original.Envelope()), send.Timeout(time.Second))
	var none *send.NoReceiptError
	if !errors.As(err, &none) || none.InDoubtUntil.IsZero() || !strings.Contains(err.Error(), "in doubt until") {
		t.Fatalf("a send whose wait ends while the key is in doubt answered %v; want no receipt yet, in doubt until a time", err)
	}
	t.Logf("send: %v", err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := client.WaitReceipt(ctx, sent)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != send.Created || rc.TaskID != "task-1" {
		t.Fatalf("the wait answered %s %s; want created task-1", rc.Outcome, rc.TaskID)
	}
	rs := receiptsFor(t, env, rc.Delivery.StreamSeq, 10*time.Second)
	if len(rs) != 2 || rs[0].Outcome != document.OutcomeInDoubt || rs[1].Outcome != document.OutcomeCreated {
		t.Fatalf("receipts %+v; want in_doubt then created", rs)
	}
	mu.Lock()
	defer mu.Unlock()
	if !none.InDoubtUntil.Equal(until) {
		t.Errorf("send said in doubt until %v; want %v", none.InDoubtUntil, until)
	}
	doubt := rs[0]
	if doubt.DecidedAfter != until.UTC().Format(time.RFC3339Nano) || !strings.Contains(doubt.Note, "an earlier POST for this key timed out") {
		t.Errorf("in_doubt receipt decided_after %q note %q; want %s and the service's error", doubt.DecidedAfter, doubt.Note, until.UTC())
	}
	if doubt.Delivery.Delivered != 1 || rs[1].Delivery.Delivered != 2 || rs[1].DecidedAfter != "" {
		t.Errorf("deliveries %d then %d (created decided_after %q); want 1 then 2", doubt.Delivery.Delivered, rs[1].Delivery.Delivered, rs[1].DecidedAfter)
	}
	if len(calls) != 2 || calls[1].Before(until) {
		t.Errorf("calls at %v; want two, the second after %v", calls, until)
	}
}

// A service that answers in doubt on every call still ends the message:
// MaxInDoubtDeliveries deliveries are left out of the budget, each with
// its in_doubt receipt, then the budget counts, and the dead letter says
// that the key was held in doubt, never that sending again is safe.
func TestAServiceThatAnswersInDoubtForEverEndsInADeadLetterThatSaysSo(t *testing.T) {
	env := testenv.Start(t)
	svc := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
		return taskservice.Result{}, taskservice.InDoubt(errors.New("the lock expired while the call ran"), time.Now().Add(10*time.Millisecond))
	})
	topo := inDoubtTopology
	topo.MaxDeliver, topo.MaxNakDelay = 2, 100*time.Millisecond
	env.Executor(executor.Config{ID: "exec-doubt", TaskService: svc, Topology: topo})
	seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
	var rs []*document.Receipt
	deadline := time.Now().Add(60 * time.Second)
	for {
		rs = receiptsFor(t, env, seq, 20*time.Second)
		if last := rs[len(rs)-1]; document.Terminal(last.Outcome) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	last := rs[len(rs)-1]
	if len(rs) != executor.MaxInDoubtDeliveries+1 || last.Outcome != document.OutcomeDeadLettered || last.Failure == nil {
		t.Fatalf("%d receipts, the last %s; want %d in_doubt then dead_lettered", len(rs), last.Outcome, executor.MaxInDoubtDeliveries)
	}
	for _, r := range rs[:len(rs)-1] {
		if r.Outcome != document.OutcomeInDoubt || r.DecidedAfter == "" {
			t.Errorf("receipt of delivery %d is %s decided after %q; want in_doubt with a time", r.Delivery.Delivered, r.Outcome, r.DecidedAfter)
		}
	}
	reason := last.Failure.Reason
	t.Logf("reason: %s", reason)
	for _, want := range []string{"held the key in doubt", "the lock expired while the call ran", document.DeadLetterInDoubt} {
		if !strings.Contains(reason, want) {
			t.Errorf("the dead letter's reason does not say %q", want)
		}
	}
	if strings.Contains(reason, "is safe") {
		t.Errorf("the dead letter's reason says that sending again is safe")
	}
	if want := int64(executor.MaxInDoubtDeliveries + topo.MaxDeliver); last.Failure.Attempts != want || last.Delivery.Delivered != uint64(want) {
		t.Errorf("dead-lettered after %d attempts on delivery %d; want %d", last.Failure.Attempts, last.Delivery.Delivered, want)
	}
}

// What a service says about its answer (taskservice.Result.Reason) is the
// receipt's note, cut to what a receipt may hold; an answer with nothing to
// say has no note at all.
func TestTheServicesReasonIsTheReceiptsNote(t *testing.T) {
	const ledger = "the intent ledger holds this key for another request digest"
	long := strings.Repeat("ü", document.MaxTextBytes)
	for _, c := range []struct {
		name   string
		result taskservice.Result
		note   string
	}{
		{"a conflict's reason", taskservice.Result{Outcome: taskservice.Conflict, TaskID: "task-1", Reason: ledger}, ledger},
		{"a create's reason", taskservice.Result{Outcome: taskservice.Created, TaskID: "task-2", Reason: "found issue 7 claiming the key without proof; left it alone"},
			"found issue 7 claiming the key without proof; left it alone"},
		{"a reason longer than a receipt holds, cut", taskservice.Result{Outcome: taskservice.Replayed, TaskID: "task-3", Reason: long},
			long[:document.MaxTextBytes-len("…")-1] + "…"},
		{"no reason", taskservice.Result{Outcome: taskservice.Created, TaskID: "task-4"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			svc := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) { return c.result, nil })
			env.Executor(executor.Config{ID: "exec-note", TaskService: svc})
			rc := env.Send(testenv.Seed(t).Original.Envelope())
			if rc.Outcome != string(c.result.Outcome) || rc.Note != c.note {
				t.Errorf("receipt %s with note %.80q (%d bytes); want %s with note %.80q (%d bytes)", rc.Outcome, rc.Note, len(rc.Note), c.result.Outcome, c.note, len(c.note))
			}
		})
	}
}

// A service may say in doubt until a time a receipt cannot write, or one
// already past: the receipt says the nearest time it can (the last of year
// 9999, or now), decodes, and the message comes back.
func TestADoubtUntilATimeNoReceiptCanWriteStillGivesAReceiptThatDecodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		until time.Time
		want  func(got time.Time) bool
	}{
		{"a year past 9999", time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC),
			func(got time.Time) bool { return got.Equal(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)) }},
		{"the zero time", time.Time{}, func(got time.Time) bool { return time.Since(got) < time.Minute }},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			var calls sync.Map
			svc := taskservice.Func(func(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
				if _, again := calls.LoadOrStore(req.IntentID, true); !again {
					return taskservice.Result{}, taskservice.InDoubt(errors.New("in doubt"), c.until)
				}
				return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1"}, nil
			})
			topo := inDoubtTopology
			topo.MaxNakDelay = 100 * time.Millisecond
			env.Executor(executor.Config{ID: "exec-doubt", TaskService: svc, Topology: topo})
			rc := env.Send(testenv.Seed(t).Original.Envelope())
			rs := receiptsFor(t, env, rc.Delivery.StreamSeq, 10*time.Second)
			if len(rs) != 2 || rs[0].Outcome != document.OutcomeInDoubt || rs[1].Outcome != document.OutcomeCreated {
				t.Fatalf("receipts %+v; want in_doubt then created", rs)
			}
			got, err := time.Parse(time.RFC3339Nano, rs[0].DecidedAfter)
			if err != nil || !c.want(got) {
				t.Errorf("decided_after %q (%v)", rs[0].DecidedAfter, err)
			}
		})
	}
}
