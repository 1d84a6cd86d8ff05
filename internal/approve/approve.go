package approve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// ErrMismatch is returned when the request does not point at the candidate.
var ErrMismatch = errors.New("approve: request does not point at this candidate")

// Options say who approves, when, and under which approval id.
type Options struct {
	By string
	// At is the approval time; zero means now.
	At time.Time
	// ID is the approval id; empty means one derived from the request digest
	// and the time, so that two approvals of one request differ.
	ID string
	// Key, when set, signs the approval, valid until NotAfter.
	Key *sign.Key
	// NotAfter ends a signed approval's validity; zero means At + Lifetime.
	NotAfter time.Time
	// Lifetime is used when NotAfter is zero; zero means DefaultLifetime.
	Lifetime time.Duration
}

// DefaultLifetime is how long a signed approval is valid by default.
const DefaultLifetime = 7 * 24 * time.Hour

// Approve reads a candidate and a request (JSON bytes), checks them strictly,
// and returns the approval binding both.
//
// With a key that records its reviewer's name (publisher keygen), By
// defaults to that name, and another name is refused (sign.ErrWrongSigner):
// executors reject a signed approval whose approved_by is not its signer's.
func Approve(candidate, request []byte, opts Options) (*document.Approval, error) {
	if err := opts.checkApprover(); err != nil {
		return nil, err
	}
	cv, cand, err := readDocument("candidate", candidate, document.DecodeCandidate)
	if err != nil {
		return nil, err
	}
	rv, req, err := readDocument("request", request, document.DecodeRequest)
	if err != nil {
		return nil, err
	}
	candDigest, err := canon.DigestTree(cv)
	if err != nil {
		return nil, fmt.Errorf("digesting the candidate: %w", err)
	}
	reqDigest, err := canon.DigestTree(rv)
	if err != nil {
		return nil, fmt.Errorf("digesting the request: %w", err)
	}
	if err := checkPointsAt(req, cand, candDigest); err != nil {
		return nil, err
	}
	at := opts.At
	if at.IsZero() {
		at = time.Now()
	}
	at = at.UTC().Truncate(time.Second)
	a := newApproval(opts, at, cand, req, candDigest, reqDigest)
	if opts.Key != nil {
		if err := Sign(a, opts.Key, opts.notAfter(at)); err != nil {
			return nil, err
		}
	}
	if err := checkPassesGate(a); err != nil {
		return nil, err
	}
	return a, nil
}

// checkApprover defaults By to the key's reviewer and checks that an
// approver is named, and that a key signs only for its own reviewer.
func (opts *Options) checkApprover() error {
	if opts.Key != nil {
		if opts.By == "" {
			opts.By = opts.Key.Name
		}
		if err := opts.Key.CheckSigner(opts.By); err != nil {
			return fmt.Errorf("approve: %w", err)
		}
	}
	if strings.TrimSpace(opts.By) == "" {
		return errors.New("approve: the approver's name (--by) is required")
	}
	return nil
}

// readDocument parses and strictly decodes one document, the what (such as
// "candidate") naming it in errors.
func readDocument[T any](what string, data []byte, decode func(string, any) (*T, error)) (any, *T, error) {
	v, err := document.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	doc, err := decode("$", v)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	return v, doc, nil
}

// checkPointsAt checks that the request points at this very candidate.
func checkPointsAt(req *document.Request, cand *document.Candidate, candDigest string) error {
	ref := req.CandidateRef
	switch {
	case ref.CandidateID != cand.CandidateID:
		return fmt.Errorf("%w: request %q names candidate %q, not %q", ErrMismatch, req.RequestID, ref.CandidateID, cand.CandidateID)
	case ref.SourceVersion != cand.Source.Version:
		return fmt.Errorf("%w: request %q names source version %q, but the candidate is from %q", ErrMismatch, req.RequestID, ref.SourceVersion, cand.Source.Version)
	case ref.CandidateDigest != candDigest:
		return fmt.Errorf("%w: request %q names candidate digest %s, but the candidate's digest is %s", ErrMismatch, req.RequestID, ref.CandidateDigest, candDigest)
	}
	return nil
}

// newApproval is the unsigned approval, given at at, binding the candidate
// and the request by their digests.
func newApproval(opts Options, at time.Time, cand *document.Candidate, req *document.Request, candDigest, reqDigest string) *document.Approval {
	// The decoder has checked that the provider is a known one.
	capability, _ := document.CapabilityOf(req.Provider)
	id := opts.ID
	if id == "" {
		id = fmt.Sprintf("approval-%s-%s-%s", reqDigest[len("sha256:"):len("sha256:")+12], at.Format("20060102T150405Z"), nuid.Next()[:8])
	}
	return &document.Approval{
		SchemaVersion: document.ApprovalVersion,
		ApprovalID:    id,
		ApprovedBy:    opts.By,
		ApprovedAt:    at.Format(time.RFC3339),
		Candidate:     document.ApprovedCandidate{CandidateID: cand.CandidateID, Digest: candDigest, SourceVersion: cand.Source.Version},
		Request:       document.ApprovedRequest{RequestID: req.RequestID, Digest: reqDigest},
		Capabilities:  []string{capability},
	}
}

// notAfter ends the validity of a signed approval given at at.
func (opts *Options) notAfter(at time.Time) time.Time {
	if !opts.NotAfter.IsZero() {
		return opts.NotAfter
	}
	life := opts.Lifetime
	if life == 0 {
		life = DefaultLifetime
	}
	return at.Add(life)
}

// checkPassesGate checks that what is written passes the strict decoder
// the gate uses.
func checkPassesGate(a *document.Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("approve: encoding the approval: %w", err)
	}
	v, err := document.Parse(b)
	if err == nil {
		_, err = document.DecodeApproval("$", v)
	}
	if err != nil {
		return fmt.Errorf("approve: the approval would not pass the gate: %w", err)
	}
	return nil
}

// Sign signs an approval with key, valid until notAfter: it sets key_id and
// not_after, then the signature over the canonical digest of the approval
// without its signature member.
func Sign(a *document.Approval, key *sign.Key, notAfter time.Time) error {
	a.KeyID = key.ID
	a.NotAfter = notAfter.UTC().Truncate(time.Second).Format(time.RFC3339)
	a.Signature = ""
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("approve: encoding the approval: %w", err)
	}
	v, err := document.Parse(b)
	if err != nil {
		return fmt.Errorf("approve: reading the approval back: %w", err)
	}
	d, err := sign.UnsignedDigest(v.(map[string]any))
	if err != nil {
		return fmt.Errorf("approve: digesting the approval: %w", err)
	}
	if a.Signature, err = key.Sign(d); err != nil {
		return err
	}
	return nil
}
