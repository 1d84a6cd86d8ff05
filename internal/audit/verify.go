package audit

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Report is the checker's verdict.
type Report struct {
	OK bool `json:"ok"`
	// Window is the part of the history the checks could see.
	Window Window `json:"window"`
	// Gate says which gate checks were re-run on the messages.
	Gate GateRun `json:"gate"`
	// Service is the task service instance and store that were audited.
	Service ServiceIdentity `json:"service"`
	// Listing sums up the tasks a service that keeps no call log listed:
	// the pipeline's and those the probe and the demo left (null for a
	// service audited by its records).
	Listing *ListingSummary `json:"listing,omitempty"`
	Checks  []Check         `json:"checks"`
}

// callRef is the call reference of the call a receipt reports.
func callRef(r *document.Receipt) string {
	return topology.CallRef(r.Delivery.StreamSeq, r.Delivery.Delivered, r.Delivery.Attempt)
}

func serviceOutcome(o string) bool {
	return o == document.OutcomeCreated || o == document.OutcomeReplayed || o == document.OutcomeConflict
}

// Options are the checker's settings.
type Options struct {
	// Gate is re-run on every stored message, with expiry judged at the time
	// the stream stored it. nil runs the checks that need no keys
	// (envelope, approval_format, candidate_binding, request_binding,
	// capability) on signed and unsigned approvals alike; signature and
	// expiry need a Checker with the trusted approvers' keys.
	Gate *gate.Checker
	// AllowExternal is how many task service calls from outside the
	// executors (without a call reference naming an APPROVALS delivery) are
	// accepted.
	AllowExternal int
	// AllowRepeatedDeliveries is how many calls on a delivery number that
	// already made a call are accepted: a NATS server that loses consumer
	// state (a crash before its state was flushed, a leader change) numbers
	// a delivery again.
	AllowRepeatedDeliveries int
	// Serves are the (provider, destination) pairs the audited service
	// serves: the gate's re-run refuses a message for any other, as the
	// executors' gates did. Nil skips that check.
	Serves []gate.Destination
}

// recheck re-runs the gate on one stored message: the full check with the
// Gate, else the checks that need no keys.
func (o Options) recheck(subject string, envelope []byte, stored time.Time) (*gate.Verdict, error) {
	var v *gate.Verdict
	var err error
	if o.Gate == nil {
		v, err = gate.CheckDeliveryBindings(subject, envelope)
	} else {
		v, err = o.Gate.CheckDelivery(subject, envelope, stored)
	}
	if err != nil || o.Serves == nil || v.Request == nil {
		return v, err
	}
	// The destinations the audited service serves, as its executors'
	// gates checked them (a Gate with its own Serves has checked already).
	if err := gate.Serves(o.Serves, v.Request); err != nil {
		return nil, err
	}
	return v, nil
}

// Verify applies the rules to in with the default Options: no external
// calls, no repeated delivery numbers, the gate's checks that need no keys.
func Verify(in *Input) Report { return VerifyWith(in, Options{}) }

// VerifyWith applies the rules to in.
func VerifyWith(in *Input, o Options) Report {
	v := newView(in, o)
	if in.Listing != nil {
		return report(in, v, o, verifyListed(v))
	}
	return report(in, v, o, makeChecks(verifyChecks, func(r rule, c *Check) { r.verify(c, v) }))
}

func report(in *Input, v *view, o Options, checks []Check) Report {
	rep := Report{OK: true, Window: v.window(), Gate: describeGate(o.Gate, o.Serves != nil), Service: in.Service, Checks: checks}
	if in.Listing != nil {
		sum := summarize(*in.Listing, pipelineKeys(in, v))
		rep.Listing = &sum
	}
	for _, c := range checks {
		rep.OK = rep.OK && c.OK
	}
	return rep
}

// sortedKeys returns the keys of m in order, so that a check reports what
// it finds in the same order on every run.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
