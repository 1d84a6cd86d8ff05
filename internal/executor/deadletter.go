package executor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// unknownOutcome ends the reason of a dead letter whose outcome is unknown
// (deliveries or retries ran out): what it means for the task, and what to
// do about it.
const unknownOutcome = document.DeadLetterUnknownOutcome

// refusedUntilFixed ends the reason of a dead letter whose service refused
// the call knowing that it created nothing (taskservice.NotCreated): a
// resend cannot say more, it is refused the same way.
const refusedUntilFixed = document.DeadLetterNothingCreated

// refusedForGood ends the reason of a dead letter whose service refused the
// call for good (taskservice.Permanent) without saying that it created
// nothing: a resend is refused the same way, so it is not said to be safe.
const refusedForGood = document.DeadLetterRefused

// stillInDoubt ends the reason of a dead letter of a message whose task
// service held its key in doubt (taskservice.InDoubt): an earlier call may
// have landed, and a resend may be held in doubt the same way.
const stillInDoubt = document.DeadLetterInDoubt

// outOfDeliveries ends the life of a message whose deliveries are spent,
// before anything else is done with it: it is dead-lettered, unless an
// earlier delivery's receipt is already stored (see deadLetter).
func (e *Executor) outOfDeliveries(d *delivery) {
	d.id = document.Identify(d.msg.Data())
	e.log.WarnContext(d.ctx, "a message ran out of deliveries", "intent_id", d.id.IntentID,
		"stream_seq", d.seq, "delivered", d.delivered, "budget", e.cfg.Topology.MaxDeliver)
	reason := fmt.Sprintf("deliveries ran out: no executor finished the message in %d deliveries (executors died or stalled with it)", d.delivered-1)
	if d.inDoubt > 0 {
		reason = fmt.Sprintf("deliveries ran out: no executor finished the message in %d deliveries (%d of them answered in doubt; executors died or stalled with the others)",
			d.delivered-1, d.inDoubt)
		e.deadLetterEnding(d, reason, stillInDoubt)
		return
	}
	e.deadLetter(d, reason)
}

// decidedBefore finishes a delivery whose message already has a stored
// receipt with the given outcome, adding none: the message is acked after
// a service's answer, terminated after the executor's refusal or dead
// letter, so that it never ends with two different outcomes.
func (e *Executor) decidedBefore(d *delivery, prior, what string, attrs ...any) {
	attrs = append([]any{"intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered, "stored_outcome", prior}, attrs...)
	e.log.WarnContext(d.ctx, what, attrs...)
	_, ack := d.child(spanAck)
	var err error
	if prior == document.OutcomeRejected || prior == document.OutcomeDeadLettered {
		err = d.msg.Term()
	} else {
		err = d.msg.Ack()
	}
	endChild(ack, err)
	if err != nil {
		e.log.WarnContext(d.ctx, "ack failed; the delivery comes back", "stream_seq", d.seq, "err", err)
	}
	d.done(prior, nil)
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
// dead letter means for the task (unknownOutcome, refusedUntilFixed or
// refusedForGood).
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
	e.log.WarnContext(d.ctx, "dead-lettering a message", "intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered, "reason", reason)
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
	r.Failure = &document.Failure{Reason: clip(reason), Attempts: int64(min(d.delivered, uint64(e.cfg.Topology.MaxDeliver)+d.freeInDoubt()))}
	e.finish(d, r, true)
}
