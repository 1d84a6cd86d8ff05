package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Point names a place in the handling of one delivery where a fault can be
// injected for tests.
type Point string

// Fault points, in the order a delivery passes them.
const (
	// Taken: a delivery within its budget is taken, before the gate.
	Taken     Point = "taken"
	AfterCall Point = "after-call" // the service answered; no receipt yet
	// AfterReceipt: the receipt is stored (for a receipt stored in a batch,
	// the batch's commit is acknowledged); no ack yet.
	AfterReceipt Point = "after-receipt"
	BeforeAck    Point = "before-ack" // just before the ack
)

// Fault points of a receipt batch, passed once per batch (with the first
// delivery of the batch) between AfterCall and AfterReceipt.
const (
	// BatchStaged: the batch's messages before its commit are published;
	// the commit is not.
	BatchStaged Point = "batch-staged"
	// BatchCommitSent: the commit is published too; its ack has not
	// arrived, so nothing of the batch is acked.
	BatchCommitSent Point = "batch-commit-sent"
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
	// commit at once; default 2.
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
		cfg.ReceiptBatchesInFlight = 2
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
		return err
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

	sem := make(chan struct{}, e.cfg.Concurrency)
	var handlers sync.WaitGroup
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
		return fmt.Errorf("executor: consuming: %w", err)
	}
	budget := topology.DeadLetterBudget(e.cfg.Topology)
	e.log.Info("consuming", "stream", topology.ApprovalsStream, "consumer", topology.Consumer,
		"concurrency", e.cfg.Concurrency, "receipt_batch", e.cfg.ReceiptBatch,
		"deliveries_before_dead_letter", budget.Deliveries, "retry_delays", budget.Delays,
		"ack_wait", e.cfg.Topology.AckWait)
	if ready != nil {
		close(ready)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changed := make(chan error, 1)
	go e.watchConsumer(watchCtx, e.cfg.ConsumerCheckInterval, changed)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-changed:
	}
	stopWatch()
	e.log.Info("draining: no new deliveries; finishing those in flight")
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(e.cfg.CallTimeout + 5*time.Second):
	}
	handlers.Wait()
	e.inflight.Wait()
	e.log.Info("drained")
	return runErr
}

// delivery is one delivery of one stream message.
type delivery struct {
	msg       jetstream.Msg
	seq       uint64
	delivered uint64
	attempt   string // unique id of this handling
	// scope is the scope its receipts and dead letters are filed under:
	// the one its subject names (subjects.ScopeOfApproval), so that they
	// land where the one who could publish it may read them and never
	// under another scope; subjects.ScopeUnknown when the subject names
	// none. The gate refuses a message whose request names another scope
	// than its subject.
	scope  string
	id     document.Identity
	start  time.Time
	stored time.Time // when the stream stored the message
	// released, when set, is called once the delivery no longer needs its
	// handler slot (its receipt waits for a batch, or it is finished).
	released func()
	// finished, when set, is called once the delivery is acked, terminated
	// or given back.
	finished func()
}

// release gives the handler slot back, once.
func (d *delivery) release() {
	if d.released != nil {
		d.released()
		d.released = nil
	}
}

// done marks the delivery finished.
func (d *delivery) done() {
	d.release()
	if d.finished != nil {
		d.finished()
		d.finished = nil
	}
}

// handle processes one delivery. released is called when the handler slot is
// no longer needed, finished when the delivery is finished; each exactly once.
func (e *Executor) handle(msg jetstream.Msg, released, finished func()) {
	d := &delivery{msg: msg, start: time.Now(), attempt: nuid.Next(), released: released, finished: finished,
		scope: subjects.ScopeOfApproval(msg.Subject())}
	meta, err := msg.Metadata()
	if err != nil {
		// Not a delivery the executor can place: no stream sequence to key a
		// receipt or a dead letter by, no delivery count to weigh against the
		// budget. Give it back rather than drop it: the server keeps its
		// count and it stays visible as pending.
		delay := e.cfg.Topology.MaxNakDelay
		e.log.Error("a delivery without JetStream metadata; giving it back", "subject", msg.Subject(),
			"reply", msg.Reply(), "retry_in", delay, "err", err)
		if nerr := msg.NakWithDelay(delay); nerr != nil {
			e.log.Warn("nak failed", "subject", msg.Subject(), "err", nerr)
		}
		e.retried(d, err)
		d.done()
		return
	}
	d.seq, d.delivered, d.stored = meta.Sequence.Stream, meta.NumDelivered, meta.Timestamp
	if d.delivered > uint64(e.cfg.Topology.MaxDeliver) {
		// The budget is spent: end the message's life before anything else.
		e.outOfDeliveries(d)
		return
	}
	if e.cfg.Fault != nil {
		d.id = document.Identify(msg.Data())
		e.fault(Taken, d)
	}

	// A delivery after the first may follow one whose receipt was stored
	// and whose ack was lost: the message has its outcome. A stored refusal
	// or dead letter stands, and the message is terminated again without a
	// call (the gate's verdict changes when the trusted approvers are
	// reloaded; a service that failed may create now). A stored answer of
	// the service is asked for again (the service replays it), but a
	// refusal by the gate now does not replace it.
	var prior string
	if d.delivered > 1 {
		d.id = document.Identify(msg.Data())
		stop := e.progress(msg)
		prior, err = e.storedReceipt(d)
		stop()
		if err != nil {
			e.retry(d, "looking for a stored receipt of a redelivered message failed; will retry", err)
			return
		}
		if prior == document.OutcomeRejected || prior == document.OutcomeDeadLettered {
			e.decidedBefore(d, prior, "a redelivered message already has its receipt (its ack was lost); terminating it, not handling it again")
			return
		}
	}

	v, err := e.cfg.Gate.CheckDelivery(msg.Subject(), msg.Data(), d.stored)
	if err != nil {
		var ge *gate.Error
		if !errors.As(err, &ge) {
			ge = &gate.Error{Check: gate.CheckEnvelope, Path: "$", Reason: err.Error()}
		}
		// The ids of a refused message, as far as they can be read.
		d.id = document.Identify(msg.Data())
		if prior != "" {
			e.decidedBefore(d, prior, "the gate refuses a redelivered message that already has its receipt (its ack was lost); acking it, not refusing it",
				"check", ge.Check, "reason", ge.Reason)
			return
		}
		r := e.receipt(d, document.OutcomeRejected)
		r.Rejection = &document.Rejection{Check: ge.Check, Path: clip(ge.Path), Reason: clip(ge.Reason)}
		e.finish(d, r, true)
		return
	}
	d.id = document.Identity{IntentID: v.Request.IntentID, Scope: v.Request.KeyScope(), RequestID: v.Request.RequestID, ApprovalID: v.Approval.ApprovalID}

	resp, err := e.call(d, v)
	if err == nil {
		if cerr := taskservice.Check(resp); cerr != nil {
			err = taskservice.Permanent(fmt.Errorf("executor: the task service broke its contract: %w", cerr))
		}
	}
	if err != nil {
		e.callFailed(d, err)
		return
	}
	e.fault(AfterCall, d)
	r := e.receipt(d, string(resp.Outcome))
	r.TaskID = &resp.TaskID
	r.TaskDeleted = resp.TaskDeleted
	if resp.StoreID != "" {
		r.StoreID = &resp.StoreID
	}
	if c := resp.Counts; c != nil {
		r.Counts = &document.Counts{
			RequestsReceived: c.RequestsReceived,
			CreatesExecuted:  c.CreatesExecuted,
			TasksExisting:    c.TasksExisting,
		}
	}
	e.finish(d, r, false)
}

// CallRef names one handling's call to the task service, as recorded by the
// service: "APPROVALS:<stream_seq>:<delivery>:<attempt>".
func CallRef(seq, delivered uint64, attempt string) string {
	return topology.ApprovalsStream + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.FormatUint(delivered, 10) + ":" + attempt
}

// call asks the service to create the task, signalling progress to the
// server while it waits so that the delivery is not handed to another
// instance meanwhile.
func (e *Executor) call(d *delivery, v *gate.Verdict) (taskservice.Result, error) {
	defer e.progress(d.msg)()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.CallTimeout)
	defer cancel()
	req := CallRequest(v, CallRef(d.seq, d.delivered, d.attempt))
	req.NotAfter = keylife.Deadline(req.NotAfter, e.deliveryWait)
	return e.svc.Create(ctx, req)
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

// CallRequest is the task service call for a message the gate let through:
// keyed by the request's scope ("default" when it names none) and intent
// id, and carrying the approval's expiry (zero for an unsigned approval,
// whose key the service then keeps for ever).
func CallRequest(v *gate.Verdict, callRef string) taskservice.Request {
	q := v.Request
	req := taskservice.Request{
		Scope:         q.KeyScope(),
		NotAfter:      v.NotAfter,
		IntentID:      q.IntentID,
		RequestDigest: v.RequestDigest,
		RequestID:     q.RequestID,
		Task:          taskservice.Task{Title: q.Task.Title, AssigneePersonRef: q.Task.AssigneePersonRef, DueAt: q.Task.DueAt},
		Request:       v.RequestJSON,
		CallRef:       callRef,
		CandidateID:   q.CandidateRef.CandidateID,
		SourceVersion: q.CandidateRef.SourceVersion,
	}
	if v.Approval != nil {
		req.ApprovedBy = v.Approval.ApprovedBy
	}
	if c := v.Candidate; c != nil {
		req.Summary = c.Summary
		req.TranscriptID = c.Source.TranscriptID
		for _, e := range c.Evidence {
			req.Evidence = append(req.Evidence, e.Quote)
		}
	}
	req.Provider, req.Destination = q.Provider, q.DestinationName()
	return req
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

// callFailed retries a transient failure later, and dead-letters a message
// that has used its deliveries or that the service refuses outright.
func (e *Executor) callFailed(d *delivery, err error) {
	permanent := taskservice.IsPermanent(err)
	if !permanent && d.delivered < uint64(e.cfg.Topology.MaxDeliver) {
		e.retry(d, "task service call failed; will retry", err)
		return
	}
	reason := fmt.Sprintf("task service call failed on delivery %d of %d: %v", d.delivered, e.cfg.Topology.MaxDeliver, err)
	if permanent {
		reason = fmt.Sprintf("task service refused the call: %v", err)
		if taskservice.IsNotCreated(err) {
			e.deadLetterEnding(d, reason, refusedUntilFixed)
			return
		}
	}
	e.deadLetter(d, reason)
}

// retry gives a delivery back to be tried again after the nak delay for
// its delivery count, and logs when the server will really deliver it again.
func (e *Executor) retry(d *delivery, what string, err error) {
	delay := topology.NakDelayAfter(e.cfg.Topology, d.delivered)
	e.log.Warn(what, "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered,
		"retry_in", topology.RedeliveryAfter(e.consumer, delay, d.delivered), "err", err)
	if nerr := d.msg.NakWithDelay(delay); nerr != nil {
		e.log.Warn("nak failed; the delivery comes back after AckWait", "stream_seq", d.seq,
			"retry_in", e.cfg.Topology.AckWait, "err", nerr)
	}
	e.retried(d, err)
	d.done()
}

// unknownOutcome ends every dead letter's reason: what a dead letter means
// for the task, and what to do about it.
const unknownOutcome = document.DeadLetterUnknownOutcome

// refusedUntilFixed ends the reason of a dead letter whose service refused
// the call knowing that it created nothing (taskservice.NotCreated): a
// resend cannot say more, it is refused the same way.
const refusedUntilFixed = document.DeadLetterNothingCreated

// outOfDeliveries ends the life of a message whose deliveries are spent,
// before anything else is done with it: it is dead-lettered, unless an
// earlier delivery's receipt is already stored (see deadLetter).
func (e *Executor) outOfDeliveries(d *delivery) {
	d.id = document.Identify(d.msg.Data())
	e.log.Warn("a message ran out of deliveries", "intent_id", d.id.IntentID,
		"stream_seq", d.seq, "delivered", d.delivered, "budget", e.cfg.Topology.MaxDeliver)
	e.deadLetter(d, fmt.Sprintf("deliveries ran out: no executor finished the message in %d deliveries (executors died or stalled with it)",
		d.delivered-1))
}

// ReceiptScanLimit bounds how many receipts of one intent are read in
// search of a receipt of one message: those stored from the time the
// message was stored (less receiptClockAllowance) on, oldest first. A
// message whose own receipt is preceded there by more receipts of its
// intent (the intent sent that many more times meanwhile) is handled as if
// it had none: a dead letter then joins its receipt.
const ReceiptScanLimit = 256

// receiptClockAllowance is how much earlier than its message a receipt may
// seem stored: the two streams' leaders may be different servers, each
// stamping by its own clock. Tests set it to zero (one server, one clock).
var receiptClockAllowance = time.Minute

// storedReceipt returns the outcome of a receipt already stored for this
// delivery's message, or "" when there is none: a receipt whose headers
// name the message with a terminal outcome (storedmsg.Ends, as every reader
// of receipts decides), the executor's (rejected, dead_lettered) or the
// service's (created, replayed, idempotency_conflict). Receipts of the intent stored
// before the message are skipped (they are of its earlier sends); the
// first ReceiptScanLimit after are read.
func (e *Executor) storedReceipt(d *delivery) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subject := subjects.Receipt(d.scope, d.id.IntentID)
	from := storedmsg.From{Seq: 1}
	if !d.stored.IsZero() {
		from = storedmsg.From{Time: d.stored.Add(-receiptClockAllowance)}
	}
	get := storedmsg.NewGetter(e.js, topology.ReceiptsStream)
	for range ReceiptScanLimit {
		m, err := get.Next(ctx, subject, from)
		switch {
		case errors.Is(err, storedmsg.ErrHeader):
			// Headers that do not decode name no message: not its receipt.
		case err != nil:
			return "", fmt.Errorf("executor: reading receipts on %s: %w", subject, err)
		case m == nil:
			return "", nil
		default:
			if seq, ok := storedmsg.Ends(m.Header); ok && seq == d.seq {
				return m.Header.Get(topology.HeaderOutcome), nil
			}
		}
		from = storedmsg.From{Seq: m.Sequence + 1}
	}
	return "", nil
}

// decidedBefore finishes a delivery whose message already has a stored
// receipt with the given outcome, adding none: the message is acked after
// a service's answer, terminated after the executor's refusal or dead
// letter, so that it never ends with two different outcomes.
func (e *Executor) decidedBefore(d *delivery, prior, what string, attrs ...any) {
	attrs = append([]any{"intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered, "stored_outcome", prior}, attrs...)
	e.log.Warn(what, attrs...)
	var err error
	if prior == document.OutcomeRejected || prior == document.OutcomeDeadLettered {
		err = d.msg.Term()
	} else {
		err = d.msg.Ack()
	}
	if err != nil {
		e.log.Warn("ack failed; the delivery comes back", "stream_seq", d.seq, "err", err)
	}
	d.done()
}

// deadLetter stores the original payload in the dead-letter stream, then a
// dead_lettered receipt, then terminates the message; every way to a dead
// letter passes here. A message whose receipt an earlier delivery stored
// (its ack lost) has its outcome: it is acked (or terminated) instead,
// never dead-lettered too. A lookup that fails, or either store failing,
// gives the delivery back: it comes again, no dead letter left blind.
func (e *Executor) deadLetter(d *delivery, reason string) {
	e.deadLetterEnding(d, reason, unknownOutcome)
}

// deadLetterEnding is deadLetter with the reason's ending given: what the
// dead letter means for the task (unknownOutcome, or refusedUntilFixed).
func (e *Executor) deadLetterEnding(d *delivery, reason, ending string) {
	stop := e.progress(d.msg)
	prior, err := e.storedReceipt(d)
	stop()
	if err != nil {
		e.retry(d, "looking for a stored receipt before dead-lettering failed; will retry", err)
		return
	}
	if prior != "" {
		e.decidedBefore(d, prior, "not dead-lettering a message that already has its receipt (its ack was lost); finishing it with that outcome",
			"reason", reason)
		return
	}
	e.log.Warn("dead-lettering a message", "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered, "reason", reason)
	// The ending is kept whole, however long the reason: readers look for
	// it (send.Failure.NothingCreated).
	reason = clipTo(reason, document.MaxTextBytes-len("; "+ending)) + "; " + ending
	m := nats.NewMsg(subjects.DeadLetter(d.scope, d.id.IntentID))
	m.Data = d.msg.Data()
	m.Header.Set(topology.HeaderReason, reason)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(d.seq, 10))
	m.Header.Set(topology.HeaderDelivered, strconv.FormatUint(d.delivered, 10))
	m.Header.Set(topology.HeaderExecutor, e.cfg.ID)
	stop = e.progress(d.msg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = e.js.PublishMsg(ctx, m, jetstream.WithMsgID("dead-"+strconv.FormatUint(d.seq, 10)),
		jetstream.WithExpectStream(topology.DeadLetterStream))
	cancel()
	stop()
	if err != nil {
		e.retry(d, "storing the dead letter failed; the delivery comes back", err)
		return
	}
	r := e.receipt(d, document.OutcomeDeadLettered)
	r.Failure = &document.Failure{Reason: clip(reason), Attempts: int64(min(d.delivered, uint64(e.cfg.Topology.MaxDeliver)))}
	e.finish(d, r, true)
}

// clip shortens a text taken from the message or an error to what a receipt
// may hold (document.MaxTextBytes), at a character boundary, so that a
// message with, say, a very long member name still gets a receipt that
// decodes.
func clip(s string) string { return clipTo(s, document.MaxTextBytes) }

// clipTo shortens s to at most limit bytes, at a character boundary, ending
// in an ellipsis when it was cut.
func clipTo(s string, limit int) string {
	const ellipsis = "…"
	if len(s) <= limit {
		return s
	}
	n := max(limit-len(ellipsis), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// receipt starts a receipt for this delivery.
func (e *Executor) receipt(d *delivery, outcome string) *document.Receipt {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var storedAt string
	if !d.stored.IsZero() {
		storedAt = d.stored.UTC().Format(time.RFC3339Nano)
	}
	return &document.Receipt{
		SchemaVersion: document.ReceiptVersion,
		ReceiptID:     "receipt-" + d.attempt,
		Outcome:       outcome,
		IntentID:      opt(d.id.IntentID),
		Scope:         receiptScope(d),
		RequestID:     opt(d.id.RequestID),
		ApprovalID:    opt(d.id.ApprovalID),
		Delivery:      document.Delivery{StreamSeq: d.seq, Delivered: d.delivered, Attempt: d.attempt, Executor: e.cfg.ID, StoredAt: storedAt},
		IssuedAt:      e.cfg.Clock().UTC().Format(time.RFC3339Nano),
	}
}

// receiptScope is the key's scope that a receipt names: the request's
// (its scope, or default) once the gate has read it; before that, the
// scope the message names if it is one, else the scope of the subject it
// was delivered on (where its receipt is filed), and none when that is not
// a scope either.
func receiptScope(d *delivery) string {
	switch {
	case d.id.Scope != "":
		return d.id.Scope
	case document.ValidScope(d.scope):
		return d.scope
	}
	return ""
}

// finish stores the receipt and then acks (or, for terminal refusals,
// terminates) the message; a message whose receipt cannot be stored is
// nak'ed so that it comes back. The receipt joins a batch when batches are
// running; the delivery's handler slot is released as soon as it waits.
func (e *Executor) finish(d *delivery, r *document.Receipt, term bool) {
	p, err := e.pendingReceipt(d, r, term)
	if err != nil {
		e.retry(d, "encoding a receipt failed", err)
		return
	}
	// Signal progress until the receipt is stored and the message acked,
	// however long its batch takes.
	p.progress = e.progress(d.msg)
	e.receipts.add(p)
}

// pendingReceipt makes the message that stores r.
func (e *Executor) pendingReceipt(d *delivery, r *document.Receipt, term bool) (*pending, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("executor: encoding a receipt: %w", err)
	}
	m := nats.NewMsg(subjects.Receipt(d.scope, d.id.IntentID))
	m.Data = body
	m.Header.Set(topology.HeaderOutcome, r.Outcome)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(d.seq, 10))
	m.Header.Set(topology.HeaderDelivered, strconv.FormatUint(d.delivered, 10))
	m.Header.Set(jetstream.MsgIDHeader, r.ReceiptID)
	m.Header.Set(jetstream.ExpectedStreamHeader, topology.ReceiptsStream)
	return &pending{d: d, r: r, m: m, term: term}, nil
}

// stored finishes a delivery whose receipt is stored: the fault points, the
// ack (or termination) and the hooks.
func (e *Executor) stored(p *pending) {
	d, r := p.d, p.r
	p.stopProgress()
	e.fault(AfterReceipt, d)
	e.fault(BeforeAck, d)
	var err error
	if p.term {
		err = d.msg.Term()
	} else {
		err = d.msg.Ack()
	}
	if err != nil {
		e.log.Warn("ack failed; the delivery comes back and is answered as a replay", "stream_seq", d.seq, "err", err)
	}
	took := time.Since(d.start)
	if e.cfg.OnReceipt != nil {
		e.cfg.OnReceipt(r, took)
	}
	if e.log.Enabled(context.Background(), slog.LevelInfo) {
		attrs := []any{"outcome", r.Outcome, "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered,
			"took", took.Round(time.Microsecond)}
		if r.TaskID != nil {
			attrs = append(attrs, "task_id", *r.TaskID)
		}
		if r.Rejection != nil {
			attrs = append(attrs, "check", r.Rejection.Check, "path", r.Rejection.Path)
		}
		e.log.Info("receipt", attrs...)
	}
	d.done()
}

// notStored gives a delivery whose receipt could not be stored back for a
// later attempt.
func (e *Executor) notStored(p *pending, err error) {
	p.stopProgress()
	e.retry(p.d, "storing the receipt failed; the delivery comes back", err)
}

func (e *Executor) retried(d *delivery, reason error) {
	if e.cfg.OnRetry != nil {
		e.cfg.OnRetry(d.delivered, reason)
	}
}

func (e *Executor) fault(p Point, d *delivery) {
	if e.cfg.Fault != nil {
		e.cfg.Fault(p, d.seq, d.delivered, d.id.IntentID)
	}
}
