package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/taskservice"
)

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
	// inDoubt is how many earlier deliveries of the message stored an
	// in_doubt receipt (counted by storedReceipt): see freeInDoubt.
	inDoubt uint64
	// prior is the outcome of a receipt an earlier delivery stored (its
	// ack lost), "" when there is none: a message with one is never held
	// in doubt, which would follow its outcome with an in_doubt receipt.
	prior string
	// comeBack is the delay after which the message is to be delivered
	// again once its in_doubt receipt, which does not end it, is stored:
	// it is nak'ed with it, not acked.
	comeBack time.Duration
	// span is the delivery's consumer span (nil once ended), ctx its
	// context: the parent of its children and the context of its log
	// lines.
	span trace.Span
	ctx  context.Context
}

// release gives the handler slot back, once.
func (d *delivery) release() {
	if d.released != nil {
		d.released()
		d.released = nil
	}
}

// done marks the delivery finished, and ends its span with outcome (and
// err, for a delivery given back).
func (d *delivery) done(outcome string, err error) {
	d.release()
	d.endSpan(outcome, err)
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
	e.startSpan(d)
	meta, err := msg.Metadata()
	if err != nil {
		e.unplaceable(d, err)
		return
	}
	d.seq, d.delivered, d.stored = meta.Sequence.Stream, meta.NumDelivered, meta.Timestamp
	if d.recording() {
		d.span.SetAttributes(tracing.MessagingDeliveryCount.Int64(int64(d.delivered)),
			tracing.MessagingStreamSequence.Int64(int64(d.seq)))
	}
	prior, ended := e.priorOutcome(d)
	if ended {
		return
	}
	d.prior = prior
	if d.counted() > uint64(e.cfg.Topology.MaxDeliver) {
		// The budget is spent: end the message's life before anything
		// else is done with it.
		e.outOfDeliveries(d)
		return
	}
	if e.cfg.Fault != nil {
		d.id = document.Identify(msg.Data())
		e.fault(Taken, d)
	}
	v, err := e.checkGate(d)
	if err != nil {
		e.refused(d, prior, err)
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
	e.finish(d, e.answered(d, &resp), false)
}

// unplaceable gives back a delivery without JetStream metadata: not one
// the executor can place, with no stream sequence to key a receipt or a
// dead letter by, no delivery count to weigh against the budget. Given
// back rather than dropped, the server keeps its count and it stays
// visible as pending.
func (e *Executor) unplaceable(d *delivery, err error) {
	msg := d.msg
	delay := e.cfg.Topology.MaxNakDelay
	e.log.ErrorContext(d.ctx, "a delivery without JetStream metadata; giving it back", "subject", msg.Subject(),
		"reply", msg.Reply(), "retry_in", delay, "err", err)
	if nerr := msg.NakWithDelay(delay); nerr != nil {
		e.log.WarnContext(d.ctx, "nak failed", "subject", msg.Subject(), "err", nerr)
	}
	e.retried(d, err)
	d.done(OutcomeRetry, err)
}

// priorOutcome returns the outcome of a receipt an earlier delivery of the
// message stored, and finishes the delivery (ended true) when that
// outcome stands or the lookup failed. It counts on d the earlier
// deliveries that stored an in_doubt receipt, which the budget leaves out.
//
// A delivery after the first may follow one whose receipt was stored and
// whose ack was lost: the message has its outcome. A stored refusal or
// dead letter stands, and the message is terminated again without a call
// (the gate's verdict changes when the trusted approvers are reloaded; a
// service that failed may create now). A stored answer of the service is
// asked for again (the service replays it), but a refusal by the gate now
// does not replace it.
func (e *Executor) priorOutcome(d *delivery) (prior string, ended bool) {
	if d.delivered <= 1 {
		return "", false
	}
	d.id = document.Identify(d.msg.Data())
	stop := e.progress(d.msg)
	prior, err := e.storedReceipt(d)
	stop()
	if err != nil {
		e.retry(d, "looking for a stored receipt of a redelivered message failed; will retry", err)
		return "", true
	}
	if prior == document.OutcomeRejected || prior == document.OutcomeDeadLettered {
		e.decidedBefore(d, prior, "a redelivered message already has its receipt (its ack was lost); terminating it, not handling it again")
		return "", true
	}
	return prior, false
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
// first ReceiptScanLimit after are read. On the way it sets d.inDoubt to
// the number of earlier deliveries of the message that stored an in_doubt
// receipt (each counted once, by its delivery count).
func (e *Executor) storedReceipt(d *delivery) (outcome string, err error) {
	ctx, span := d.child(spanReceiptLookup)
	defer func() { endChild(span, err) }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	subject := subjects.Receipt(d.scope, d.id.IntentID)
	from := storedmsg.From{Seq: 1}
	if !d.stored.IsZero() {
		from = storedmsg.From{Time: d.stored.Add(-receiptClockAllowance)}
	}
	get := storedmsg.NewGetter(e.js, topology.ReceiptsStream)
	var inDoubt map[string]struct{} // delivery counts of in_doubt receipts
	defer func() { d.inDoubt = uint64(len(inDoubt)) }()
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
			if seq, ok := storedmsg.Named(m.Header); ok && seq == d.seq && m.Header.Get(topology.HeaderOutcome) == document.OutcomeInDoubt {
				if inDoubt == nil {
					inDoubt = map[string]struct{}{}
				}
				inDoubt[m.Header.Get(topology.HeaderDelivered)] = struct{}{}
			}
		}
		from = storedmsg.From{Seq: m.Sequence + 1}
	}
	return "", nil
}

// refused finishes a delivery the gate refuses with a rejected receipt,
// unless an earlier delivery's receipt already gave it its outcome.
func (e *Executor) refused(d *delivery, prior string, err error) {
	ge := gateError(err)
	if d.recording() {
		d.span.SetAttributes(tracing.Check.String(ge.Check))
	}
	// The ids of a refused message, as far as they can be read.
	d.id = document.Identify(d.msg.Data())
	if prior != "" {
		e.decidedBefore(d, prior, "the gate refuses a redelivered message that already has its receipt (its ack was lost); acking it, not refusing it",
			"check", ge.Check, "reason", ge.Reason)
		return
	}
	r := e.receipt(d, document.OutcomeRejected)
	r.Rejection = &document.Rejection{Check: ge.Check, Path: clip(ge.Path), Reason: clip(ge.Reason)}
	e.finish(d, r, true)
}

// answered is the receipt of the service's answer resp.
func (e *Executor) answered(d *delivery, resp *taskservice.Result) *document.Receipt {
	r := e.receipt(d, string(resp.Outcome))
	r.TaskID = &resp.TaskID
	r.TaskDeleted = resp.TaskDeleted
	if resp.Reason != "" {
		r.Note = clip(resp.Reason)
	}
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
	return r
}

// call asks the service to create the task, signalling progress to the
// server while it waits so that the delivery is not handed to another
// instance meanwhile.
func (e *Executor) call(d *delivery, v *gate.Verdict) (taskservice.Result, error) {
	defer e.progress(d.msg)()
	ctx, span := d.child(spanCreate)
	ctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	req := CallRequest(v, topology.CallRef(d.seq, d.delivered, d.attempt))
	req.NotAfter = keylife.Deadline(req.NotAfter, e.deliveryWait)
	resp, err := e.svc.Create(ctx, req)
	endChild(span, err)
	return resp, err
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

// callFailed retries a transient failure later, and dead-letters a message
// that has used its deliveries or that the service refuses outright. A
// call refused in doubt stores an in_doubt receipt and comes back when the
// doubt is over, outside the budget while MaxInDoubtDeliveries allow,
// unless an earlier delivery stored its outcome (its ack lost): that one
// stands, and the failure is retried as any other until the budget ends
// it with that outcome.
func (e *Executor) callFailed(d *delivery, err error) {
	permanent := taskservice.IsPermanent(err)
	until, inDoubt := taskservice.InDoubtUntil(err)
	if inDoubt && !permanent && d.prior == "" && d.inDoubt < MaxInDoubtDeliveries {
		e.heldInDoubt(d, until, err)
		return
	}
	budget := e.cfg.Topology.MaxDeliver
	if !permanent && d.counted() < uint64(budget) {
		e.retry(d, "task service call failed; will retry", err)
		return
	}
	switch {
	case permanent:
		ending := refusedForGood
		if taskservice.IsNotCreated(err) {
			ending = refusedUntilFixed
		}
		e.deadLetterEnding(d, fmt.Sprintf("task service refused the call: %v", err), ending)
	case inDoubt:
		e.deadLetterEnding(d, inDoubtReason(d, budget, until, err), stillInDoubt)
	case d.inDoubt > 0:
		e.deadLetterEnding(d, fmt.Sprintf("task service call failed on delivery %d of %d, after %d deliveries answered in doubt: %v",
			d.counted(), budget, d.freeInDoubt(), err), stillInDoubt)
	default:
		e.deadLetter(d, fmt.Sprintf("task service call failed on delivery %d of %d: %v", d.counted(), budget, err))
	}
}

// retry gives a delivery back to be tried again after the nak delay for
// its delivery count, and logs when the server will really deliver it again.
func (e *Executor) retry(d *delivery, what string, err error) {
	delay := topology.NakDelayAfter(e.cfg.Topology, d.delivered)
	e.log.WarnContext(d.ctx, what, "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered,
		"retry_in", topology.RedeliveryAfter(e.consumer, delay, d.delivered), "err", err)
	if nerr := d.msg.NakWithDelay(delay); nerr != nil {
		e.log.WarnContext(d.ctx, "nak failed; the delivery comes back after AckWait", "stream_seq", d.seq,
			"retry_in", e.cfg.Topology.AckWait, "err", nerr)
	}
	e.retried(d, err)
	d.done(OutcomeRetry, err)
}

// retried calls the OnRetry hook, if set, for a delivery given back.
func (e *Executor) retried(d *delivery, reason error) {
	if e.cfg.OnRetry != nil {
		e.cfg.OnRetry(d.delivered, reason)
	}
}
