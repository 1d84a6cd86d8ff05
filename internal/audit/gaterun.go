package audit

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file re-runs the gate on every stored message, as the executors ran
// it (gate-passes).

// GateRun says which of the gate's checks verify re-ran on every message.
type GateRun struct {
	Checks     []string `json:"checks"`
	NotChecked []string `json:"not_checked,omitempty"`
	Note       string   `json:"note"`
}

func describeGate(c *gate.Checker, serves bool) GateRun {
	if c == nil {
		g := GateRun{
			Checks:     []string{gate.CheckEnvelope, gate.CheckApprovalFormat, gate.CheckCandidateBinding, gate.CheckRequestBinding, gate.CheckCapability},
			NotChecked: []string{gate.CheckSignature, gate.CheckExpiry, gate.CheckScope},
			Note: "no trusted approvers given: signatures, expiry and the approvers' scopes are not checked, on signed and unsigned approvals alike; " +
				"every other check is",
		}
		if serves {
			g.Checks = append(g.Checks, gate.CheckDestination)
		} else {
			g.NotChecked = append(g.NotChecked, gate.CheckDestination)
		}
		return g
	}
	life := c.MaxLifetime
	if life == 0 {
		life = gate.DefaultMaxLifetime
	}
	g := GateRun{Checks: slices.Clone(gate.Checks)}
	if c.Serves == nil && !serves {
		// Without the served set the gate skips the destination check.
		g.Checks = slices.DeleteFunc(g.Checks, func(n string) bool { return n == gate.CheckDestination })
		g.NotChecked = []string{gate.CheckDestination}
	}
	g.Note = fmt.Sprintf("signed approvals verified against %d trusted approvers, each for the scopes its entry names; expiry judged at the time the stream stored each message, lifetime at most %s; ",
		c.Keys.Len(), life)
	if c.AllowUnsigned {
		g.Note += "unsigned approvals accepted without a signature, expiry or scope check (insecure-allow-unsigned)"
	} else {
		g.Note += "unsigned approvals refused"
	}
	return g
}

// checkGate makes gate-passes: every message that reached the service passes
// the gate, re-run as the executor ran it: on the message's data, with expiry
// judged at the time the stream stored it. A message reached the service when a
// call names it or a receipt reports the service's outcome for it.
func checkGate(c *Check, v *view) {
	calls := map[uint64]int{}
	for _, r := range v.in.Requests {
		if seq, _, ok := topology.ParseCallRef(r.CallRef); ok {
			calls[seq]++
		}
	}
	var checked, reached, refused, refusedReached, rejectedPassing int
	for _, seq := range sortedKeys(v.msgs) {
		m := v.msgs[seq]
		var outcomes []string
		rejected := false
		for _, r := range v.in.Receipts[seq] {
			if serviceOutcome(r.Outcome) {
				outcomes = append(outcomes, r.Outcome)
			}
			rejected = rejected || r.Outcome == document.OutcomeRejected
		}
		didReach := calls[seq] > 0 || len(outcomes) > 0
		if didReach {
			reached++
		}
		if !m.hasData {
			if didReach {
				c.violate("message %d reached the service, but its data was not read: the gate cannot be re-run", seq)
			}
			continue
		}
		checked++
		if m.gateErr == nil {
			if rejected {
				rejectedPassing++
			}
			continue
		}
		refused++
		if !didReach {
			continue
		}
		refusedReached++
		check, why := gate.CheckEnvelope, m.gateErr.Error()
		var ge *gate.Error
		if errors.As(m.gateErr, &ge) {
			check, why = ge.Check, ge.Path+": "+ge.Reason
		}
		c.violate("message %d (intent %q) fails the gate at %s (%s), yet it reached the service: %d calls, receipts [%s]",
			seq, m.id.IntentID, check, why, calls[seq], strings.Join(outcomes, " "))
	}
	c.fig("messages re-checked", checked)
	c.fig("messages that reached the service", reached)
	c.fig("messages the gate refuses", refused)
	c.fig("of which reached the service", refusedReached)
	c.fig("rejected messages the re-run gate lets through", rejectedPassing)
}
