package gate

import (
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
)

// Check names, in the order the gate runs them. They are stable: receipts,
// metrics and tests name them.
const (
	CheckEnvelope         = "envelope"
	CheckApprovalFormat   = "approval_format"
	CheckCandidateBinding = "candidate_binding"
	CheckRequestBinding   = "request_binding"
	CheckCapability       = "capability"
)

// Checks lists the check names in order.
var Checks = []string{CheckEnvelope, CheckApprovalFormat, CheckCandidateBinding, CheckRequestBinding, CheckCapability}

// Sentinels, one per check; an *Error unwraps to one of them.
var (
	ErrEnvelope         = errors.New("gate: envelope refused")
	ErrApprovalFormat   = errors.New("gate: not a task approval")
	ErrCandidateBinding = errors.New("gate: candidate does not match the approval")
	ErrRequestBinding   = errors.New("gate: request does not match the approval")
	ErrCapability       = errors.New("gate: capability not allowed")
)

var sentinels = map[string]error{
	CheckEnvelope:         ErrEnvelope,
	CheckApprovalFormat:   ErrApprovalFormat,
	CheckCandidateBinding: ErrCandidateBinding,
	CheckRequestBinding:   ErrRequestBinding,
	CheckCapability:       ErrCapability,
}

// Error is the gate's refusal: the check that failed, the field path (such as
// $.approval.capabilities) and a reason a person can act on. Cause holds the
// decoder's error where there is one.
type Error struct {
	Check  string
	Path   string
	Reason string
	Cause  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("gate: %s failed at %s: %s", e.Check, e.Path, e.Reason)
}

// Unwrap gives the check's sentinel and, where there is one, the decoder's error.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{sentinels[e.Check], e.Cause}
	}
	return []error{sentinels[e.Check]}
}

func refuse(check, path, format string, args ...any) *Error {
	return &Error{Check: check, Path: path, Reason: fmt.Sprintf(format, args...)}
}

func fromDecoder(check string, err error) *Error {
	var de *document.Error
	if errors.As(err, &de) {
		return &Error{Check: check, Path: de.Path, Reason: de.Reason, Cause: err}
	}
	return &Error{Check: check, Path: "$", Reason: err.Error(), Cause: err}
}

// Verdict is what a message that passed the gate carries on: the decoded
// documents and the digests the gate recomputed.
type Verdict struct {
	Candidate       *document.Candidate
	Request         *document.Request
	Approval        *document.Approval
	CandidateDigest string
	RequestDigest   string
}

// Checker runs the gate with its settings. A nil or zero Checker runs the
// checks every message must pass.
type Checker struct{}

// Check runs the checker's checks on one envelope message.
func (c *Checker) Check(envelope []byte) (*Verdict, error) {
	return Check(envelope)
}

// Check runs every check on one envelope message, in order, and stops at the
// first failure. The error, when there is one, is an *Error.
func Check(envelope []byte) (*Verdict, error) {
	parts, err := document.SplitEnvelope(envelope)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	return checkParts(parts)
}

// CheckDocuments runs the gate on three separate documents, as if they were
// one envelope. A nil approval means there is none. Paths are given as inside
// an envelope ($.candidate..., $.request..., $.approval...).
func CheckDocuments(candidate, request, approval []byte) (*Verdict, error) {
	var parts document.EnvelopeParts
	var err error
	if parts.Candidate, err = document.Parse(candidate); err != nil {
		return nil, fromDecoder(CheckEnvelope, prefix(err, "$.candidate"))
	}
	if parts.Request, err = document.Parse(request); err != nil {
		return nil, fromDecoder(CheckEnvelope, prefix(err, "$.request"))
	}
	if approval != nil {
		if parts.Approval, err = document.Parse(approval); err != nil {
			return nil, fromDecoder(CheckApprovalFormat, prefix(err, "$.approval"))
		}
	}
	return checkParts(&parts)
}

// prefix moves a decoder error's root path under the given member.
func prefix(err error, member string) error {
	var de *document.Error
	if errors.As(err, &de) {
		cp := *de
		cp.Path = member + de.Path[1:]
		return &cp
	}
	return err
}

func checkParts(p *document.EnvelopeParts) (*Verdict, error) {
	cand, err := document.DecodeCandidate("$.candidate", p.Candidate)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	req, err := document.DecodeRequest("$.request", p.Request)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}

	if p.Approval == nil {
		return nil, refuse(CheckApprovalFormat, "$.approval", "the message carries no approval; a person must approve the request (publisher approve) before it is sent")
	}
	if m, ok := p.Approval.(map[string]any); ok {
		if sv, ok := m["schema_version"].(string); ok && sv != document.ApprovalVersion {
			return nil, refuse(CheckApprovalFormat, "$.approval.schema_version",
				"the approval member holds a %q document, not a %q: no other kind of decision passes for an approval", sv, document.ApprovalVersion)
		}
	}
	appr, err := document.DecodeApproval("$.approval", p.Approval)
	if err != nil {
		return nil, fromDecoder(CheckApprovalFormat, err)
	}

	candDigest, err := canon.DigestTree(p.Candidate)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	reqDigest, err := canon.DigestTree(p.Request)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}

	switch {
	case appr.Candidate.CandidateID != cand.CandidateID:
		return nil, refuse(CheckCandidateBinding, "$.approval.candidate.candidate_id",
			"the approval is for candidate %q, but the message carries candidate %q", appr.Candidate.CandidateID, cand.CandidateID)
	case appr.Candidate.SourceVersion != cand.Source.Version:
		return nil, refuse(CheckCandidateBinding, "$.candidate.source.version",
			"the candidate comes from source version %q, but the approval was given for version %q; review the candidate again", cand.Source.Version, appr.Candidate.SourceVersion)
	case appr.Candidate.Digest != candDigest:
		return nil, refuse(CheckCandidateBinding, "$.candidate",
			"the candidate's digest is %s, but the approval was given for %s: the candidate changed after it was approved", candDigest, appr.Candidate.Digest)
	}

	switch {
	case appr.Request.RequestID != req.RequestID:
		return nil, refuse(CheckRequestBinding, "$.approval.request.request_id",
			"the approval is for request %q, but the message carries request %q", appr.Request.RequestID, req.RequestID)
	case appr.Request.Digest != reqDigest:
		return nil, refuse(CheckRequestBinding, "$.request",
			"the request's digest is %s, but the approval was given for %s: the request was edited after it was approved", reqDigest, appr.Request.Digest)
	case req.CandidateRef.CandidateID != cand.CandidateID:
		return nil, refuse(CheckRequestBinding, "$.request.candidate_ref.candidate_id",
			"the request points at candidate %q, not at the message's candidate %q", req.CandidateRef.CandidateID, cand.CandidateID)
	case req.CandidateRef.CandidateDigest != candDigest:
		return nil, refuse(CheckRequestBinding, "$.request.candidate_ref.candidate_digest",
			"the request points at candidate digest %s, not at the message's candidate (%s)", req.CandidateRef.CandidateDigest, candDigest)
	case req.CandidateRef.SourceVersion != cand.Source.Version:
		return nil, refuse(CheckRequestBinding, "$.request.candidate_ref.source_version",
			"the request points at source version %q, not at the candidate's %q", req.CandidateRef.SourceVersion, cand.Source.Version)
	}

	if len(appr.Capabilities) != 1 || appr.Capabilities[0] != document.CapabilityCreateFakeTask {
		return nil, refuse(CheckCapability, "$.approval.capabilities",
			"the capabilities must be exactly [%q], not %q", document.CapabilityCreateFakeTask, appr.Capabilities)
	}

	return &Verdict{Candidate: cand, Request: req, Approval: appr, CandidateDigest: candDigest, RequestDigest: reqDigest}, nil
}
