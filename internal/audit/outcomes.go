package audit

import (
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file checks how each approval message ended: one terminal outcome
// (one-terminal-outcome), and no call for a message the gate rejected
// (rejected-not-called).

// checkTerminal makes one-terminal-outcome: every approval message has one
// terminal outcome: a terminal receipt or a dead letter, and never two that
// contradict each other (see contradiction).
func checkTerminal(c *Check, in *Input) {
	var withReceipt, dead, contradictory int
	for _, seq := range sortedKeys(in.Messages) {
		terminal, inDoubt := false, ""
		for _, r := range in.Receipts[seq] {
			terminal = terminal || r.Of(seq)
			if r.Outcome == document.OutcomeInDoubt {
				inDoubt = r.DecidedAfter
			}
		}
		_, isDead := in.DeadLetters[seq]
		if terminal {
			withReceipt++
		}
		if isDead {
			dead++
		}
		switch {
		case terminal || isDead:
		case inDoubt != "":
			c.violate("message %d (intent %q) has neither a terminal receipt nor a dead letter: its last receipt says in doubt until %s (in_doubt ends nothing)",
				seq, in.Messages[seq].IntentID, inDoubt)
		default:
			c.violate("message %d (intent %q) has neither a receipt nor a dead letter", seq, in.Messages[seq].IntentID)
		}
	}
	// Contradictions are looked for on every message with receipts or a
	// dead letter, held by the stream or not.
	seqs := map[uint64]bool{}
	for seq := range in.Receipts {
		seqs[seq] = true
	}
	for seq := range in.DeadLetters {
		seqs[seq] = true
	}
	for _, seq := range sortedKeys(seqs) {
		_, isDead := in.DeadLetters[seq]
		if why := contradiction(in.Receipts[seq], isDead); why != "" {
			contradictory++
			c.violate("message %d has contradictory terminal outcomes: %s", seq, why)
		}
	}
	c.fig("messages", len(in.Messages))
	c.fig("with a terminal receipt", withReceipt)
	c.fig("dead-lettered", dead)
	c.fig("with contradictory terminal outcomes", contradictory)
	c.fig("consumer pending", int(in.Consumer.Pending))
	c.fig("consumer ack pending", in.Consumer.AckPending)
}

// contradiction says how a message's terminal outcomes contradict each
// other, or returns "". A message ends in one of four ways: the service
// answered that its task exists (created, or replayed on a later
// delivery), the service answered idempotency_conflict, the gate rejected
// it, or it was dead-lettered (a dead_lettered receipt, or a dead letter
// in DEADLETTERS). An in_doubt receipt is none of them: it ends nothing,
// and contradicts nothing. More than one of these for one message contradicts: a
// task the service created for a message then said to be of unknown
// outcome, a message both refused by the gate and sent. Several receipts
// of one way (replayed on each redelivery) do not.
func contradiction(rs []*document.Receipt, deadLetter bool) string {
	type way struct{ name, first string }
	var ways []way
	seen := map[string]bool{}
	add := func(name, first string) {
		if !seen[name] {
			seen[name] = true
			ways = append(ways, way{name, first})
		}
	}
	for _, r := range rs {
		what := fmt.Sprintf("%s (receipt %s, delivery %d)", r.Outcome, r.ReceiptID, r.Delivery.Delivered)
		switch r.Outcome {
		case document.OutcomeCreated, document.OutcomeReplayed:
			add("exists", what)
		case document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered:
			add(r.Outcome, what)
		}
	}
	if deadLetter {
		add(document.OutcomeDeadLettered, "a dead letter in "+topology.DeadLetterStream)
	}
	if len(ways) < 2 {
		return ""
	}
	parts := make([]string, len(ways))
	for i, w := range ways {
		parts[i] = w.first
	}
	return strings.Join(parts, " and ")
}

// checkRejected makes rejected-not-called: no rejected message reached the service.
func checkRejected(c *Check, in *Input) {
	rejected := map[uint64]bool{}
	for seq, rs := range in.Receipts {
		for _, r := range rs {
			if r.Outcome == document.OutcomeRejected {
				rejected[seq] = true
			}
		}
	}
	for _, r := range in.Requests {
		if seq, _, ok := topology.ParseCallRef(r.CallRef); ok && rejected[seq] {
			c.violate("message %d was rejected, yet request %d (%s) reached the service", seq, r.Seq, r.CallRef)
		}
	}
	// A rejected message with a receipt of the service's outcome too is a
	// contradiction, reported by check 1.
	c.fig("rejected messages", len(rejected))
}
