package executor

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// MaxInDoubtDeliveries bounds how many deliveries of one message answered
// in doubt (taskservice.InDoubt) are left out of its delivery budget. A
// delivery the service answers in doubt stores an in_doubt receipt and
// comes back once the doubt is over; it does not count against the budget
// (Topology.MaxDeliver), so that a long doubt does not dead-letter the
// message while an earlier call may still land. Past this many, an answer
// in doubt counts as any transient failure, so that a service that answers
// in doubt for ever still ends the message, in a dead letter that says so.
const MaxInDoubtDeliveries = 20

// inDoubtJitter bounds the jitter added to the wait for a key's doubt to
// end, beyond a tenth of the wait, so that the deliveries waiting for one
// moment do not all come back at once.
const inDoubtJitter = 250 * time.Millisecond

// lastWritable is the latest time an RFC 3339 timestamp can write.
var lastWritable = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// freeInDoubt is how many of the delivery's earlier deliveries do not
// count against the budget: those answered in doubt, up to
// MaxInDoubtDeliveries.
func (d *delivery) freeInDoubt() uint64 { return min(d.inDoubt, MaxInDoubtDeliveries) }

// counted is the delivery's number as the budget counts it.
func (d *delivery) counted() uint64 { return d.delivered - d.freeInDoubt() }

// heldInDoubt finishes a delivery whose service call was refused while an
// earlier call for its key may still land: it stores an in_doubt receipt
// that says until when, then gives the message back to be delivered after
// that time (plus jitter, at most the consumer's MaxNakDelay).
func (e *Executor) heldInDoubt(d *delivery, until time.Time, err error) {
	now := e.cfg.Clock()
	// A receipt writes a year of four digits; a time already past is
	// decided now.
	switch {
	case until.Before(now):
		until = now
	case until.After(lastWritable):
		until = lastWritable
	}
	wait := until.Sub(now)
	d.comeBack = min(wait+rand.N(wait/10+inDoubtJitter), e.cfg.Topology.MaxNakDelay)
	e.log.WarnContext(d.ctx, "the task service holds the key in doubt; storing an in_doubt receipt and delivering the message again later",
		"intent_id", d.id.IntentID, "stream_seq", d.seq, "delivered", d.delivered, "decided_after", until.UTC(),
		"retry_in", topology.RedeliveryAfter(e.consumer, d.comeBack, d.delivered), "err", err)
	r := e.receipt(d, document.OutcomeInDoubt)
	r.DecidedAfter = until.UTC().Format(time.RFC3339Nano)
	r.Note = clip(err.Error())
	e.finish(d, r, false)
}

// inDoubtReason is the reason of a dead letter whose service still held
// the key in doubt on the delivery that spent the budget.
func inDoubtReason(d *delivery, budget int, until time.Time, err error) string {
	return fmt.Sprintf("the task service still held the key in doubt (until %s) on delivery %d, after %d deliveries answered in doubt and %d more of the budget of %d: %v",
		until.UTC().Format(time.RFC3339Nano), d.delivered, d.freeInDoubt(), d.counted(), budget, err)
}
