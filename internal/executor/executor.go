package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Config configures one executor instance.
type Config struct {
	// ID names this instance in receipts; default host-pid.
	ID string
	// Concurrency is the number of deliveries handled at once (checked by
	// the gate and sent to the task service); default 32. Deliveries whose
	// receipts wait for their batch's commit do not count against it.
	Concurrency int
	// TaskService is where tasks are created: the fake task service
	// (provider.Client.TaskService) or an adapter of a real one. Required.
	TaskService taskservice.Service
	// CallTimeout bounds one call to the task service; default 5s.
	CallTimeout time.Duration
	// Topology sizes the streams and the consumer that Run provisions. Once
	// bound, the consumer's AckWait and the budget and nak delays in its
	// metadata apply (see topology.FromConsumer).
	Topology topology.Config
	Logger   *slog.Logger
	// Clock stamps receipts; default time.Now.
	Clock func() time.Time
	// Fault, when set, is called at each fault point with the delivery's
	// stream sequence, delivery count and intent id (as far as it can be
	// read); tests use it to crash or stall an instance at a chosen place.
	// Off (nil) by default.
	Fault func(p Point, seq, delivered uint64, intentID string)
	// Gate checks each message: trusted approvers, or unsigned approvals
	// allowed explicitly. Required. Its Serves lists the (provider,
	// destination) pairs TaskService serves (a Router's Serves); nil is
	// the fake task service's default destination only (FakeDefault).
	Gate *gate.Checker
	// NoProvision binds to the existing consumer instead of creating the
	// streams and the consumer, for deployments where only a provisioning
	// role may manage JetStream.
	NoProvision bool
	// OnReceipt, when set, is called after each receipt is stored and its
	// message acked or terminated, with the time the delivery took.
	OnReceipt func(r *document.Receipt, took time.Duration)
	// OnRetry, when set, is called when a delivery is given back for a
	// later attempt.
	OnRetry func(delivered uint64, reason error)
	// ReceiptBatch is the most receipts stored together as one atomic batch
	// on the RECEIPTS stream (one sync for all of them); default 1000, at
	// most 1000 (the server's limit). 1 stores every receipt alone.
	ReceiptBatch int
	// ReceiptBatchesInFlight is how many receipt batches may wait for their
	// commit at once; default 1: the stream commits a stream's batches one
	// after another, and a second slot only stores the receipts that
	// arrive just after a batch was taken in a batch of their own.
	ReceiptBatchesInFlight int
	// ConsumerCheckInterval is how often Run compares the consumer with
	// what provisioning recorded (it always does at start); default
	// DefaultConsumerCheckInterval. A consumer that differs stops Run.
	ConsumerCheckInterval time.Duration
}

// Executor is one executor instance.
type Executor struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	svc taskservice.Service
	log *slog.Logger

	// receipts stores receipts, in batches while Run is consuming.
	receipts *batcher
	// consumer is the consumer's configuration as bound by Run.
	consumer jetstream.ConsumerConfig
	// given is the topology as configured, before Run reads the consumer's
	// settings: what this executor provisions.
	given topology.Config
	// deliveryWait is how long after it was stored a message of the
	// approvals stream can still be delivered: the stream's MaxAge as
	// provisioning recorded it; 0 (keys kept for ever) when the stream
	// keeps messages for ever or no record exists. Set by Run before it
	// consumes.
	deliveryWait time.Duration

	inflight sync.WaitGroup // deliveries taken and not yet finished
}

// maxReceiptBatch is the server's default bound on an atomic batch.
const maxReceiptBatch = 1000

// New returns an executor using the connection nc.
func New(nc *nats.Conn, cfg Config) (*Executor, error) {
	if cfg.Gate == nil {
		return nil, errors.New("executor: no gate policy: set Config.Gate (trusted approvers, or unsigned approvals allowed explicitly)")
	}
	if cfg.TaskService == nil {
		return nil, errors.New("executor: no task service: set Config.TaskService")
	}
	if cfg.Gate.Serves == nil {
		// An executor always checks the destination: one configured with
		// no served set serves the fake task service's default
		// destination, as it always has, and refuses the others.
		g := *cfg.Gate
		g.Serves = []gate.Destination{FakeDefault}
		cfg.Gate = &g
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ReceiptBatch <= 0 {
		cfg.ReceiptBatch = maxReceiptBatch
	}
	cfg.ReceiptBatch = min(cfg.ReceiptBatch, maxReceiptBatch)
	if cfg.ReceiptBatchesInFlight <= 0 {
		cfg.ReceiptBatchesInFlight = 1
	}
	if cfg.ConsumerCheckInterval <= 0 {
		cfg.ConsumerCheckInterval = DefaultConsumerCheckInterval
	}
	cfg.Topology = cfg.Topology.WithDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("executor: opening JetStream: %w", err)
	}
	e := &Executor{cfg: cfg, nc: nc, js: js, svc: cfg.TaskService, log: cfg.Logger.With("executor", cfg.ID), given: cfg.Topology}
	e.receipts = newBatcher(e)
	return e, nil
}

// Run ensures the topology, consumes until ctx is done, then stops pulling,
// lets the deliveries already taken finish (their receipts stored and their
// messages acked), and returns. The caller drains the connection afterwards.
// ready, if not nil, is closed once consuming.
//
// Run refuses a consumer that differs from what provisioning recorded: at
// start it returns a *ConsumerError naming each difference without
// consuming; while it runs it checks again every ConsumerCheckInterval,
// and on a difference stops as when ctx ends and returns that error.
//
// A delivery holds one of Concurrency slots while it is checked and the task
// service is called; its receipt then joins the next receipt batch and the
// slot goes to the next delivery. A batch's messages are acked only after
// the stream has acknowledged the batch's commit, which it does once every
// receipt of the batch is stored and synced.
func (e *Executor) Run(ctx context.Context, ready chan<- struct{}) error {
	cons, err := e.bind(ctx)
	if err != nil {
		return err
	}
	if err := e.checkConsumer(ctx); err != nil {
		return err
	}
	if e.deliveryWait, err = e.approvalsMaxAge(ctx); err != nil {
		return err
	}
	if err := e.receipts.start(); err != nil {
		return err
	}
	defer e.receipts.stop()

	var handlers sync.WaitGroup
	cc, err := e.consume(cons, &handlers)
	if err != nil {
		return err
	}
	budget := topology.DeadLetterBudget(e.cfg.Topology)
	e.log.Info("consuming", "stream", topology.ApprovalsStream, "consumer", topology.Consumer,
		"concurrency", e.cfg.Concurrency, "receipt_batch", e.cfg.ReceiptBatch,
		"deliveries_before_dead_letter", budget.Deliveries, "retry_delays", budget.Delays,
		"ack_wait", e.cfg.Topology.AckWait)
	if ready != nil {
		close(ready)
	}
	runErr := e.untilDoneOrChanged(ctx)
	e.drain(cc, &handlers)
	return runErr
}

// bind provisions the streams and the consumer and binds to it (or, with
// NoProvision, binds to the consumer provisioning created), and adopts
// the consumer's settings as it is.
func (e *Executor) bind(ctx context.Context) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	var err error
	if e.cfg.NoProvision {
		cons, err = e.js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
		if err != nil {
			err = fmt.Errorf("executor: binding to consumer %s on %s (created by provisioning): %w", topology.Consumer, topology.ApprovalsStream, err)
		}
	} else {
		cons, err = topology.Ensure(ctx, e.js, e.cfg.Topology)
	}
	if err != nil {
		return nil, err
	}
	if info := cons.CachedInfo(); info != nil {
		// Count the budget, delay retries and signal progress by the
		// consumer as it is, not by this instance's flags.
		e.consumer = info.Config
		e.cfg.Topology = topology.FromConsumer(e.cfg.Topology, info.Config)
		if info.Config.MaxDeliver > 0 || len(info.Config.BackOff) > 0 {
			e.log.Warn("the consumer was provisioned by an older version: the server limits its deliveries or overrides retry delays; provision it again",
				"consumer", topology.Consumer, "max_deliver", info.Config.MaxDeliver, "back_off", info.Config.BackOff,
				"budget", e.cfg.Topology.MaxDeliver)
		}
	}
	return cons, nil
}

// consume starts pulling deliveries, each handled by a goroutine of its
// own (counted by handlers) while one of Concurrency slots is free.
func (e *Executor) consume(cons jetstream.Consumer, handlers *sync.WaitGroup) (jetstream.ConsumeContext, error) {
	sem := make(chan struct{}, e.cfg.Concurrency)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		sem <- struct{}{}
		e.inflight.Add(1)
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			e.handle(msg, func() { <-sem }, e.inflight.Done)
		}()
	}, jetstream.PullMaxMessages(2*e.cfg.Concurrency),
		// Notice a lost pull (a server node gone) within seconds, not the
		// default 30 s expiry.
		jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(2*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				e.log.Warn("consuming", "err", err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("executor: consuming: %w", err)
	}
	return cc, nil
}

// untilDoneOrChanged waits until ctx is done, checking the consumer every
// ConsumerCheckInterval meanwhile; it returns the difference found, if
// that came first.
func (e *Executor) untilDoneOrChanged(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changed := make(chan error, 1)
	go e.watchConsumer(watchCtx, e.cfg.ConsumerCheckInterval, changed)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-changed:
	}
	return runErr
}

// drain stops pulling and waits for the deliveries already taken to finish.
func (e *Executor) drain(cc jetstream.ConsumeContext, handlers *sync.WaitGroup) {
	e.log.Info("draining: no new deliveries; finishing those in flight")
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(e.cfg.CallTimeout + 5*time.Second):
	}
	handlers.Wait()
	e.inflight.Wait()
	e.log.Info("drained")
}

// approvalsMaxAge is how long the approvals stream keeps a message, as
// provisioning recorded it (topology.ReadRecord; the audit reports a
// stream whose settings differ from the record); 0 when it keeps messages
// for ever. Without a record (an executor started with --no-provision
// before anything was provisioned) nothing says how long a message may
// wait, so it returns 0 too: keys are then kept for ever, never too short.
// It reads the record, not the stream: an executor's credentials need not
// allow reading stream settings. Provisioning again with a longer MaxAge
// reaches running executors at their next start; until then they send
// deadlines by the old one (restart them after raising it).
func (e *Executor) approvalsMaxAge(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, err := topology.ReadRecord(ctx, e.js)
	switch {
	case errors.Is(err, topology.ErrNoRecord):
		e.log.Warn("no record of what was provisioned: keys are sent without a deadline and kept for ever; run executor provision",
			"stream", topology.ApprovalsStream)
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("executor: reading stream %s's MaxAge (how long keys must outlive an approval): %w", topology.ApprovalsStream, err)
	}
	sc, ok := rec.Streams[topology.ApprovalsStream]
	if !ok {
		return 0, fmt.Errorf("executor: the record of what was provisioned names no stream %s: %w", topology.ApprovalsStream, topology.ErrNoRecord)
	}
	return sc.MaxAge, nil
}

// progress sends a progress signal for msg every third of AckWait until the
// returned function is called. It costs one timer, no goroutine, per call.
func (e *Executor) progress(msg jetstream.Msg) (stop func()) {
	every := max(e.cfg.Topology.AckWait/3, 10*time.Millisecond)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = msg.InProgress()
		t.Reset(every)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
