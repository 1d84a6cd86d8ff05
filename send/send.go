package send

import (
	"errors"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
)

// Documents are the three documents of one approved request, each as its
// author wrote it (JSON). A nil Approval builds a message without one, which
// every gate refuses at approval_format.
type Documents struct {
	Candidate []byte // an action-candidate.v1
	Request   []byte // a task-request.v1
	Approval  []byte // a task-approval.v1
}

// The gate's check names, in the order it runs them. A Refusal and a
// rejected receipt name one of them.
const (
	CheckEnvelope         = "envelope"
	CheckApprovalFormat   = "approval_format"
	CheckSignature        = "signature"
	CheckExpiry           = "expiry"
	CheckCandidateBinding = "candidate_binding"
	CheckRequestBinding   = "request_binding"
	CheckCapability       = "capability"
	CheckDestination      = "destination"
	CheckScope            = "scope"
)

var (
	// ErrRefused is matched by every Refusal.
	ErrRefused = errors.New("send: refused by the local gate")
	// ErrInvalid is matched by the error of Build for a document that is
	// not JSON (or absent), of ParseEnvelope (with ErrNotEnvelope), and of
	// trusted approvers that say nothing usable.
	ErrInvalid = errors.New("send: invalid document")
	// ErrNoCheck is returned by the zero Check, which runs nothing.
	ErrNoCheck = errors.New("send: no check chosen: use Bindings or Trusted")
	// ErrNoTrustedApprovers is returned by a Trusted check without trusted
	// approvers.
	ErrNoTrustedApprovers = errors.New("send: no trusted approvers: Trusted needs them; Bindings runs the checks that need none")
)

// Refusal is the gate's refusal of a message: the check that failed (one
// of the Check constants), the field path (such as
// $.approval.capabilities) and a reason a person can act on. Nothing was
// published.
type Refusal struct {
	Check  string
	Path   string
	Reason string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("send: %s failed at %s: %s", r.Check, r.Path, r.Reason)
}

// Unwrap gives ErrRefused.
func (r *Refusal) Unwrap() error { return ErrRefused }

// refusal turns the gate's error into a Refusal; any other is the
// package's own error, without the gate's types.
func refusal(err error) error {
	var ge *gate.Error
	if errors.As(err, &ge) {
		return &Refusal{Check: ge.Check, Path: ge.Path, Reason: ge.Reason}
	}
	return fmt.Errorf("send: checking: %v", err)
}

// Verdict is what a local check found: the ids and the digests it
// recomputed.
type Verdict struct {
	IntentID   string
	RequestID  string
	ApprovalID string
	// Scope is the caller scope in which the intent id is a key: the
	// request's scope, "default" when it names none.
	Scope string
	// CandidateDigest and RequestDigest are the documents' digests
	// ("sha256:" over RFC 8785 JSON).
	CandidateDigest string
	RequestDigest   string
	// SignedBy names the trusted approver whose signature was verified;
	// empty when signatures were not checked or the approval is unsigned.
	SignedBy string
	// NotAfter is the approval's not_after; zero for an unsigned approval.
	NotAfter time.Time
	// NotChecked names the checks this check did not run.
	NotChecked []string
}

func verdict(v *gate.Verdict, notChecked []string) *Verdict {
	// The gate read not_after as an RFC 3339 time: it parses.
	notAfter, _ := parseTime(v.Approval.NotAfter)
	return &Verdict{
		IntentID: v.Request.IntentID, Scope: v.Request.KeyScope(), RequestID: v.Request.RequestID, ApprovalID: v.Approval.ApprovalID,
		CandidateDigest: v.CandidateDigest, RequestDigest: v.RequestDigest,
		SignedBy: v.SignedBy, NotAfter: notAfter, NotChecked: notChecked,
	}
}

type mode int

const (
	modeNone mode = iota
	modeBindings
	modeTrusted
)

// Check is a local run of the executors' gate. Its mode is chosen by name
// (Bindings, Trusted); the zero Check runs nothing and returns ErrNoCheck.
type Check struct {
	mode    mode
	trusted *TrustedApprovers
	now     func() time.Time
}

// Bindings runs the checks that need no keys: envelope, approval_format,
// candidate_binding, request_binding and capability. Signature, expiry and
// scope are left to the executors (Verdict.NotChecked names them).
func Bindings() Check { return Check{mode: modeBindings} }

// Trusted runs every check an executor runs, with the signature checked
// against the trusted approvers and expiry judged at the time of the check
// (At judges it at another).
func Trusted(t *TrustedApprovers) Check {
	return Check{mode: modeTrusted, trusted: t}
}

// At returns the check with expiry judged at now() instead of the time of
// the check: a test's clock, or a console's that shows what will have
// expired by a later time. A nil now is the time of the check. Bindings
// judges no expiry, so At changes nothing for it.
func (c Check) At(now func() time.Time) Check {
	c.now = now
	return c
}

// notChecked is what Bindings leaves out.
var notChecked = []string{CheckSignature, CheckExpiry, CheckScope}

func (c Check) checker() (*gate.Checker, error) {
	switch {
	case c.mode == modeNone:
		return nil, ErrNoCheck
	case c.mode == modeTrusted && (c.trusted == nil || c.trusted.keys == nil):
		return nil, ErrNoTrustedApprovers
	case c.mode == modeTrusted:
		return &gate.Checker{Keys: c.trusted.keys, Now: c.now}, nil
	}
	return nil, nil
}

// Documents runs the check on the three documents before they are laid in
// an envelope, in the gate's order, and stops at the first failure, a
// *Refusal. Paths are given as inside an envelope ($.candidate...,
// $.request..., $.approval...).
func (c Check) Documents(d Documents) (*Verdict, error) {
	g, err := c.checker()
	if err != nil {
		return nil, err
	}
	if g == nil {
		v, err := gate.CheckDocumentBindings(d.Candidate, d.Request, d.Approval)
		if err != nil {
			return nil, refusal(err)
		}
		return verdict(v, notChecked), nil
	}
	v, err := g.CheckDocuments(d.Candidate, d.Request, d.Approval)
	if err != nil {
		return nil, refusal(err)
	}
	return verdict(v, nil), nil
}

// Envelope runs the check on the message exactly as an executor reads it.
// It changes nothing in e.
func (c Check) Envelope(e *Envelope) (*Verdict, error) {
	g, err := c.checker()
	if err != nil {
		return nil, err
	}
	var v *gate.Verdict
	nc := notChecked
	if g == nil {
		v, err = gate.CheckBindings(e.data)
	} else {
		v, err = g.Check(e.data)
		nc = nil
	}
	if err != nil {
		return nil, refusal(err)
	}
	return verdict(v, nc), nil
}

// Envelope is one task-envelope.v1 message: the three documents side by
// side, each with its own bytes (compacted), so that its digest is
// unchanged. An Envelope is never changed once made, and is safe for
// concurrent use.
type Envelope struct {
	data []byte
	// scope and intentID are the key an executor reads from data, read
	// once when the envelope is made.
	scope    string
	intentID string
}

// newEnvelope makes the envelope of data, reading its key once.
func newEnvelope(data []byte) *Envelope {
	id := document.Identify(data)
	return &Envelope{data: data, scope: id.Scope, intentID: id.IntentID}
}

// Build lays the three documents in one envelope. It checks nothing but
// that each is JSON (its errors match ErrInvalid): run a Check first, or
// the executors' gate decides alone.
func Build(d Documents) (*Envelope, error) {
	b, err := document.BuildEnvelope(d.Candidate, d.Request, d.Approval)
	if err != nil {
		return nil, fmt.Errorf("%w: building the envelope: %v", ErrInvalid, err)
	}
	return newEnvelope(b), nil
}

// Bytes returns a copy of the message as it will be published.
func (e *Envelope) Bytes() []byte { return append([]byte(nil), e.data...) }

// IntentID is the intent id an executor reads from the message, which
// names its subjects ("" when it names none an executor could read).
func (e *Envelope) IntentID() string { return e.intentID }

// Scope is the caller scope an executor reads from the message, which
// names its subjects with the intent id ("" when it names none, or none
// that is a scope: the default scope).
func (e *Envelope) Scope() string { return e.scope }
