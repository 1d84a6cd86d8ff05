package executor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

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
	if cfg.Topology == (topology.Config{}) {
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
	s := seed(t)
	if rc := send(t, env, s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
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
	c, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 1 || info.NumAckPending != 0 || info.NumWaiting != 0 {
		t.Fatalf("consumer pending %d, ack pending %d, pulls waiting %d: want the approval untaken and no executor pulling",
			info.NumPending, info.NumAckPending, info.NumWaiting)
	}
}

func TestStartReturnsOnceConsumingAndStopWaitsForTheRun(t *testing.T) {
	env := testenv.Start(t)
	ex, _ := newExecutor(t, env, executor.Config{ID: "exec-start"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := ex.Start(ctx)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil || info.NumWaiting == 0 {
		t.Errorf("after Start the consumer has %d pulls waiting (%v); want the executor's", info.NumWaiting, err)
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
