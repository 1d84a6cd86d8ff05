package executor_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// refusingService is a task service that refuses every call outright, as a
// service that has started to reject the request would.
type refusingService struct{}

func (refusingService) Create(context.Context, taskservice.Request) (taskservice.Result, error) {
	return taskservice.Result{}, taskservice.Permanent(errors.New("the service refuses the request"))
}

// settled waits until the consumer has delivered at least n times and
// holds nothing pending.
func settled(t *testing.T, env *testenv.Env, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, err := audit.Consumer(ctx, env.JS)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending == 0 && st.AckPending == 0 && st.Delivered >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("consumer %+v: the message was not finished after %d deliveries", st, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// outcomesOf lists the outcomes of message seq's receipts, oldest first,
// and the dead letters stored.
func outcomesOf(t *testing.T, env *testenv.Env, seq uint64) ([]string, map[uint64]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byseq, err := audit.ReceiptsBySeq(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range byseq[seq] {
		outcomes = append(outcomes, r.Outcome)
	}
	dead, err := audit.DeadLetterSeqs(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	return outcomes, dead
}

// The reproduction: the message is created on delivery 1 and its
// receipt stored, the executor is killed before its ack; the service then
// fails on every later delivery until the budget is spent. The message ends
// with its one outcome, created, and no dead letter.
func TestAMessageCreatedWhoseAckWasLostIsNeverDeadLetteredToo(t *testing.T) {
	for _, c := range []struct {
		name string
		// fail makes the service fail from now on; it returns the service
		// the healthy executor uses (nil: the real one).
		fail func(env *testenv.Env) taskservice.Service
		// delivered is the delivery the consumer reaches.
		delivered uint64
	}{
		{"when the service then fails until the deliveries are spent", func(env *testenv.Env) taskservice.Service {
			if err := env.Stack.StopService(); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 3},
		{"when the service then refuses the call outright", func(*testenv.Env) taskservice.Service {
			return refusingService{}
		}, 2},
		{"when the service then holds the key in doubt", func(*testenv.Env) taskservice.Service {
			return taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
				return taskservice.Result{}, taskservice.InDoubt(errors.New("an earlier call may still land"), time.Now().Add(10*time.Millisecond))
			})
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			topo := topology.Config{AckWait: time.Second, MaxDeliver: 3, NakDelay: 50 * time.Millisecond, MaxNakDelay: 200 * time.Millisecond}
			seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
			killedExecutor(t, env, executor.AfterReceipt, 1, topo)
			if outcomes, _ := outcomesOf(t, env, seq); !slices.Equal(outcomes, []string{document.OutcomeCreated}) {
				t.Fatalf("receipts %v after the kill, want created", outcomes)
			}
			svc := c.fail(env)
			var log testenv.Buffer
			env.Executor(executor.Config{ID: "exec-healthy", Topology: topo, CallTimeout: 200 * time.Millisecond,
				TaskService: svc, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			settled(t, env, c.delivered)
			outcomes, dead := outcomesOf(t, env, seq)
			if !slices.Equal(outcomes, []string{document.OutcomeCreated}) || len(dead) != 0 {
				t.Fatalf("receipts %v, dead letters %v: want the one created receipt and no dead letter\n%s", outcomes, dead, log.String())
			}
			if want := "not dead-lettering a message that already has its receipt"; !strings.Contains(log.String(), want) ||
				!strings.Contains(log.String(), "stored_outcome=created") {
				t.Errorf("the log does not say %q with the stored outcome:\n%s", want, log.String())
			}
			if svc == nil {
				env.RestartService("provider")
			}
			wantCounts(t, env.Counts(), 1, 1, 1)
		})
	}
}

// The gate's verdict on one message can change between its deliveries when
// the trusted approvers are reloaded. A delivery whose receipt is stored and
// whose ack (or termination) is lost is answered by that receipt: a refusal
// is not followed by a create, a create is not followed by a refusal.
func TestAChangeOfTrustedApproversBetweenDeliveriesDoesNotChangeAStoredOutcome(t *testing.T) {
	key := scenario.TestKey()
	trusted := reviewerKeyring(t)
	nobody, err := sign.NewKeyring()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		before, after *sign.Keyring
		want          string
		counts        [3]int64
	}{
		{"a refusal by an untrusting executor stands when the approver is trusted by the redelivery",
			nobody, trusted, document.OutcomeRejected, [3]int64{0, 0, 0}},
		{"a create is not turned into a refusal when the approver is revoked before the redelivery",
			trusted, nobody, document.OutcomeCreated, [3]int64{1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			kr, err := sign.NewKeyring(c.before.Approvers()...)
			if err != nil {
				t.Fatal(err)
			}
			s, err := scenario.BuildSigned(key, time.Now().UTC().Truncate(time.Second).Add(-time.Hour), 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var once sync.Once
			var log testenv.Buffer
			env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr},
				Topology: topology.Config{AckWait: time.Second, MaxDeliver: 3, NakDelay: 50 * time.Millisecond, MaxNakDelay: 200 * time.Millisecond},
				Logger:   slog.New(slog.NewTextHandler(&log, nil)),
				Fault: func(p executor.Point, _, delivered uint64, _ string) {
					if p == executor.BeforeAck && delivered == 1 {
						// The receipt is stored; the trusted approvers are
						// reloaded and the ack is lost.
						once.Do(func() { kr.Replace(c.after) })
						<-release
					}
				}})
			t.Cleanup(func() { close(release) })
			seq := sendOnly(t, env.JS, s.Original.Envelope())
			settled(t, env, 2)
			outcomes, dead := outcomesOf(t, env, seq)
			if !slices.Equal(outcomes, []string{c.want}) || len(dead) != 0 {
				t.Fatalf("receipts %v, dead letters %v: want only %s\n%s", outcomes, dead, c.want, log.String())
			}
			if !strings.Contains(log.String(), "already has its receipt") {
				t.Errorf("the log does not say the message already had its receipt:\n%s", log.String())
			}
			wantCounts(t, env.Counts(), c.counts[0], c.counts[1], c.counts[2])
		})
	}
}

// The look-up of a stored receipt fails (the RECEIPTS stream is gone): the
// message is given back, never dead-lettered blind; once receipts can be
// read again, it is dead-lettered.
func TestAMessageIsNotDeadLetteredWhileItsStoredReceiptCannotBeLookedUp(t *testing.T) {
	env := testenv.Start(t)
	topo := topology.Config{AckWait: 5 * time.Second, MaxDeliver: 1, NakDelay: 50 * time.Millisecond, MaxNakDelay: 200 * time.Millisecond}
	retries := make(chan error, 64)
	env.Executor(executor.Config{ID: "exec-1", Topology: topo, CallTimeout: 200 * time.Millisecond,
		OnRetry: func(_ uint64, err error) {
			select {
			case retries <- err:
			default:
			}
		}})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, topology.ReceiptsStream); err != nil {
		t.Fatal(err)
	}
	seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
	// The first delivery's call fails with its budget spent (the way to a
	// dead letter that did not look before today); then the deliveries
	// past the budget.
	for i := 0; i < 3; i++ {
		select {
		case err := <-retries:
			if !strings.Contains(err.Error(), "reading receipts") {
				t.Fatalf("retry %d for %v, want the failed look-up of receipts", i+1, err)
			}
		case <-ctx.Done():
			t.Fatal("the message was not given back")
		}
	}
	if dead, err := audit.DeadLetterSeqs(ctx, env.JS); err != nil || len(dead) != 0 {
		t.Fatalf("dead letters %v (%v) while receipts cannot be read, want none", dead, err)
	}
	if _, err := topology.SetUp(ctx, env.JS, topo, topology.SetUpOptions{Logger: env.Log}); err != nil {
		t.Fatal(err)
	}
	wantDeadLettered(t, env, seq, "deliveries ran out")
}

// A dead letter promises that a resend is safe and will say what happened
// only when the outcome is unknown. A service that refuses the call for
// good has its dead letter say that a resend is refused the same way until
// the cause is fixed; one that knows it created nothing (a CalDAV UID
// clash, a resource not its own) marks its error NotCreated, and the dead
// letter says that too.
func TestADeadLetterPromisesAResendOnlyWhenTheOutcomeIsUnknown(t *testing.T) {
	const why = "another resource in the collection holds the task's UID"
	for _, c := range []struct {
		name    string
		err     error
		says    []string
		saysNot string
	}{
		{"a plain permanent refusal says a resend is refused until the cause is fixed, never that it is safe",
			taskservice.Permanent(errors.New(why)),
			[]string{why, document.DeadLetterRefused},
			"is safe"},
		{"a refusal that created nothing says a resend is refused until the cause is fixed",
			taskservice.Permanent(taskservice.NotCreated(errors.New(why))),
			[]string{why, "this call created nothing", "sending the same approval again will be refused the same way until the cause above is fixed"},
			"is safe"},
		{"a refusal that created nothing keeps its ending whole however long its reason",
			taskservice.Permanent(taskservice.NotCreated(errors.New(why + strings.Repeat(", and more", 600)))),
			[]string{why, "…; " + document.DeadLetterNothingCreated},
			"is safe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			svc := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
				return taskservice.Result{}, c.err
			})
			var log testenv.Buffer
			env.Executor(executor.Config{ID: "exec-refused", TaskService: svc, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			seq := sendOnly(t, env.JS, testenv.Seed(t).Original.Envelope())
			rs := receiptsFor(t, env, seq, 20*time.Second)
			if len(rs) != 1 || rs[0].Outcome != document.OutcomeDeadLettered || rs[0].Failure == nil {
				t.Fatalf("receipts %+v; want one dead_lettered", rs)
			}
			reason := rs[0].Failure.Reason
			t.Logf("reason: %.300s", reason)
			for _, w := range c.says {
				if !strings.Contains(reason, w) {
					t.Errorf("the dead letter's reason does not say %q", w)
				}
			}
			if strings.Contains(reason, c.saysNot) {
				t.Errorf("the dead letter's reason says %q", c.saysNot)
			}
			if !strings.Contains(log.String(), why) {
				t.Errorf("the log does not give the reason:\n%s", log.String())
			}
		})
	}
}
