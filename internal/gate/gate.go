package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/subjects"
)

// Check names, in the order the gate runs them. They are stable: receipts,
// metrics and tests name them.
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

// Checks lists the check names in order.
var Checks = []string{CheckEnvelope, CheckApprovalFormat, CheckSignature, CheckExpiry, CheckCandidateBinding, CheckRequestBinding, CheckCapability, CheckDestination, CheckScope}

// Sentinels, one per check; an *Error unwraps to one of them.
var (
	ErrEnvelope         = errors.New("gate: envelope refused")
	ErrApprovalFormat   = errors.New("gate: not a task approval")
	ErrSignature        = errors.New("gate: approval signature not valid")
	ErrExpiry           = errors.New("gate: approval expired")
	ErrCandidateBinding = errors.New("gate: candidate does not match the approval")
	ErrRequestBinding   = errors.New("gate: request does not match the approval")
	ErrCapability       = errors.New("gate: capability not allowed")
	ErrDestination      = errors.New("gate: destination not served by this executor")
	ErrScope            = errors.New("gate: approver not trusted for the request's scope")
)

var sentinels = map[string]error{
	CheckEnvelope:         ErrEnvelope,
	CheckApprovalFormat:   ErrApprovalFormat,
	CheckSignature:        ErrSignature,
	CheckExpiry:           ErrExpiry,
	CheckCandidateBinding: ErrCandidateBinding,
	CheckRequestBinding:   ErrRequestBinding,
	CheckCapability:       ErrCapability,
	CheckDestination:      ErrDestination,
	CheckScope:            ErrScope,
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

// digestPrefix starts a digest: "sha256:" + hex(SHA-256(canonical form)).
const digestPrefix = "sha256:"

// Verdict is what a message that passed the gate carries on: the decoded
// documents and the digests the gate recomputed.
type Verdict struct {
	Candidate       *document.Candidate
	Request         *document.Request
	Approval        *document.Approval
	CandidateDigest string
	RequestDigest   string
	// RequestJSON is the request document in its RFC 8785 canonical form:
	// RequestDigest is "sha256:" over exactly these bytes. The executor
	// sends it to the task service, which recomputes the digest from it.
	RequestJSON []byte
	// SignedBy names the trusted approver whose signature was verified;
	// empty for an unsigned approval.
	SignedBy string
	// NotAfter is when the approval expires (its not_after); zero for an
	// unsigned approval, which names no expiry.
	NotAfter time.Time
}

// DefaultMaxLifetime bounds not_after - approved_at of a signed approval.
const DefaultMaxLifetime = 30 * 24 * time.Hour

// clockSkew is how far in the future approved_at may lie.
const clockSkew = 5 * time.Minute

// ErrNoChecker is returned by a nil *Checker: the full check needs a real
// policy (trusted approvers, or unsigned approvals allowed explicitly), and
// the checks that need no keys are run by name (CheckBindings), never by
// leaving the policy out.
var ErrNoChecker = errors.New("gate: no checker: the full check needs a *Checker with trusted approvers or AllowUnsigned; CheckBindings runs the checks that need no keys")

// Checker is the gate with its trust settings: the executor's policy. With
// Keys it verifies signed approvals (checks signature, expiry and scope); unsigned
// approvals are refused at signature unless AllowUnsigned is set, an
// insecure mode for demos and tests. Its methods run every check, in order;
// on a nil *Checker they run none and return ErrNoChecker.
type Checker struct {
	Keys          *sign.Keyring
	AllowUnsigned bool
	// Now is the clock for expiry; nil means time.Now.
	Now func() time.Time
	// MaxLifetime bounds an approval's lifetime; zero means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// Serves lists the (provider, destination) pairs the executor serves:
	// the destination check refuses a request for any other, before the
	// task service is called. Nil skips the check, for a local check that
	// does not know which executor will take the message (publisher,
	// send); the executor always sets it (executor.New gives a checker
	// without it the fake task service's default destination only).
	Serves []Destination
}

// Destination is one place an executor serves: a provider (the request's
// "provider") and a destination name (its "destination", "default" when it
// names none).
type Destination struct {
	Provider string
	Name     string
}

// String is "provider/name", as reasons and logs show it.
func (d Destination) String() string { return d.Provider + "/" + d.Name }

// Serves is the destination check on its own: nil when serves holds the
// request's (provider, destination), else the gate's refusal at
// CheckDestination. verify re-runs it with the audited service's
// destinations.
func Serves(serves []Destination, req *document.Request) error {
	want := Destination{Provider: req.Provider, Name: req.DestinationName()}
	if slices.Contains(serves, want) {
		return nil
	}
	path := "$.request.destination"
	if !slices.ContainsFunc(serves, func(d Destination) bool { return d.Provider == want.Provider }) {
		path = "$.request.provider"
	}
	return refuse(CheckDestination, path,
		"the request is for provider %q, destination %q, but this executor serves only %s: nothing was sent; send it to an executor that serves %q, or approve a request for a destination this one serves",
		want.Provider, want.Name, Served(serves), want.String())
}

// Served names the destinations for a reason: "caldav-task.v1/default",
// "caldav-task.v1/team".
func Served(ds []Destination) string {
	if len(ds) == 0 {
		return "nothing"
	}
	q := make([]string, len(ds))
	for i, d := range ds {
		q[i] = strconv.Quote(d.String())
	}
	return strings.Join(q, ", ")
}

// Check runs the checker's checks on one envelope message, in order.
func (c *Checker) Check(envelope []byte) (*Verdict, error) {
	if c == nil {
		return nil, ErrNoChecker
	}
	return checkEnvelope(envelope, c, "")
}

// CheckAt is Check with expiry judged at the given time. The executor
// passes the time the message was stored in the stream, so that every
// delivery of one message reaches the same verdict: an approval that was
// valid when it was sent is not refused on a redelivery after its not_after
// (its first delivery may already have reached the task service).
func (c *Checker) CheckAt(envelope []byte, at time.Time) (*Verdict, error) {
	return c.CheckDelivery("", envelope, at)
}

// CheckDelivery is CheckAt for a message delivered on subject: the subject
// is part of the contract, so the envelope must name the intent whose
// subject (subjects.Approval) it was published on, or it is refused
// at envelope. Permissions that scope who may publish on which approvals
// subject mean nothing otherwise. An empty subject skips that comparison.
func (c *Checker) CheckDelivery(subject string, envelope []byte, at time.Time) (*Verdict, error) {
	if c == nil {
		return nil, ErrNoChecker
	}
	cc := *c
	cc.Now = func() time.Time { return at }
	return checkEnvelope(envelope, &cc, subject)
}

// CheckDocuments runs the checker's checks on three separate documents, as
// if they were one envelope: with Keys it also checks signature, expiry and scope
// (at the checker's clock), in the executor's order, so that a local check
// says what an executor will say. A nil approval means there is none. Paths
// are given as inside an envelope ($.candidate..., $.request...,
// $.approval...).
func (c *Checker) CheckDocuments(candidate, request, approval []byte) (*Verdict, error) {
	if c == nil {
		return nil, ErrNoChecker
	}
	parts, err := splitDocuments(candidate, request, approval)
	if err != nil {
		return nil, err
	}
	return checkParts(parts, c, "")
}

// CheckBindings runs the checks that need no keys on one envelope message,
// in order, and stops at the first failure: envelope, approval_format,
// candidate_binding, request_binding, capability. It checks no signature
// and no expiry and no scope, on signed and unsigned approvals alike: those are a
// Checker's. The error, when there is one, is an *Error.
func CheckBindings(envelope []byte) (*Verdict, error) {
	return checkEnvelope(envelope, nil, "")
}

// CheckDeliveryBindings is CheckBindings for a message delivered on
// subject, which must be its own intent's approvals subject (see
// Checker.CheckDelivery); an empty subject skips that comparison.
func CheckDeliveryBindings(subject string, envelope []byte) (*Verdict, error) {
	return checkEnvelope(envelope, nil, subject)
}

// CheckDocumentBindings runs the checks that need no keys on three separate
// documents, as if they were one envelope. A nil approval means there is
// none. Paths are given as inside an envelope.
func CheckDocumentBindings(candidate, request, approval []byte) (*Verdict, error) {
	parts, err := splitDocuments(candidate, request, approval)
	if err != nil {
		return nil, err
	}
	return checkParts(parts, nil, "")
}

// checkEnvelope splits one envelope message and checks it; a nil policy
// runs the checks that need no keys.
func checkEnvelope(envelope []byte, policy *Checker, subject string) (*Verdict, error) {
	parts, err := document.SplitEnvelopeToRelease(envelope)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	// Nothing that checkParts returns holds on to the trees: the verdict
	// holds decoded documents, refusals hold strings.
	defer parts.Release()
	return checkParts(parts, policy, subject)
}

func splitDocuments(candidate, request, approval []byte) (*document.EnvelopeParts, error) {
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
	return &parts, nil
}

// checkSignature runs the signature and expiry checks, and returns the
// trusted approver who signed (nil for an unsigned approval allowed by an
// insecure checker).
func (c *Checker) checkSignature(tree map[string]any, a *document.Approval) (*sign.Approver, error) {
	if !a.Signed() {
		if c.AllowUnsigned {
			return nil, nil
		}
		return nil, refuse(CheckSignature, "$.approval.signature",
			"the approval is not signed; sign it with publisher approve --key, or run the executor with --insecure-allow-unsigned")
	}
	approver, err := c.Keys.VerifyApproval(tree, a.KeyID, a.Signature)
	switch {
	case errors.Is(err, sign.ErrUnknownKey):
		return nil, refuse(CheckSignature, "$.approval.key_id", "the approval is signed by key %q, which is not among the trusted approvers", a.KeyID)
	case err != nil:
		return nil, refuse(CheckSignature, "$.approval.signature",
			"the signature does not match this approval's content under key %q: the approval was changed after signing, or the signature belongs to another approval", a.KeyID)
	}
	if a.ApprovedBy != approver.Name {
		return nil, refuse(CheckSignature, "$.approval.approved_by",
			"approved_by says %q, but the signature is by trusted approver %q (key %s): a signed approval names its signer", a.ApprovedBy, approver.Name, a.KeyID)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	maxLife := c.MaxLifetime
	if maxLife == 0 {
		maxLife = DefaultMaxLifetime
	}
	at, _ := time.Parse(time.RFC3339, a.ApprovedAt)
	notAfter, _ := time.Parse(time.RFC3339, a.NotAfter)
	t := now()
	switch {
	case !notAfter.After(at):
		return nil, refuse(CheckExpiry, "$.approval.not_after", "not_after (%s) is not after approved_at (%s)", a.NotAfter, a.ApprovedAt)
	case notAfter.Sub(at) > maxLife:
		return nil, refuse(CheckExpiry, "$.approval.not_after",
			"the approval is valid for %s, longer than the %s this executor accepts (the task service must keep intent records longer than any approval can be delivered)",
			notAfter.Sub(at).Round(time.Second), maxLife)
	case at.After(t.Add(clockSkew)):
		return nil, refuse(CheckExpiry, "$.approval.approved_at", "approved_at (%s) lies in the future; check the approver's clock", a.ApprovedAt)
	case t.After(notAfter):
		return nil, refuse(CheckExpiry, "$.approval.not_after", "the approval expired at %s; ask the reviewer to approve again", a.NotAfter)
	}
	return &approver, nil
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

// checkParts runs the checks in order. policy is nil only when called by the
// Bindings functions, which run the checks that need no keys by name.
func checkParts(p *document.EnvelopeParts, policy *Checker, subject string) (*Verdict, error) {
	cand, req, err := decodeAddressed(p, subject)
	if err != nil {
		return nil, err
	}
	appr, err := decodeApproval(p.Approval)
	if err != nil {
		return nil, err
	}
	var signer *sign.Approver
	if policy != nil {
		if signer, err = policy.checkSignature(p.Approval.(map[string]any), appr); err != nil {
			return nil, err
		}
	}

	candDigest, err := canon.DigestTree(p.Candidate)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	reqJSON, err := canon.Encode(p.Request)
	if err != nil {
		return nil, fromDecoder(CheckEnvelope, err)
	}
	reqSum := sha256.Sum256(reqJSON)
	reqDigest := digestPrefix + hex.EncodeToString(reqSum[:])

	if err := checkCandidateBinding(appr, cand, candDigest); err != nil {
		return nil, err
	}
	if err := checkRequestBinding(appr, req, cand, candDigest, reqDigest); err != nil {
		return nil, err
	}
	if err := checkCapability(appr, req); err != nil {
		return nil, err
	}

	// The approval covers the request's provider and destination (the
	// request digest binds both); this executor may carry it out only where
	// it serves that pair, or a task approved for one place would be made
	// in another.
	if policy != nil && policy.Serves != nil {
		if err := Serves(policy.Serves, req); err != nil {
			return nil, err
		}
	}
	if err := checkScope(signer, req); err != nil {
		return nil, err
	}

	v := &Verdict{Candidate: cand, Request: req, Approval: appr, CandidateDigest: candDigest, RequestDigest: reqDigest, RequestJSON: reqJSON}
	if signer != nil {
		v.SignedBy = signer.Name
	}
	if appr.NotAfter != "" {
		// The decoder has checked it is a time.
		v.NotAfter, _ = time.Parse(time.RFC3339, appr.NotAfter)
	}
	return v, nil
}

// decodeAddressed decodes the candidate and the request, and checks that
// the message was published on the subject of the request's key (when
// subject is given).
func decodeAddressed(p *document.EnvelopeParts, subject string) (*document.Candidate, *document.Request, error) {
	cand, err := document.DecodeCandidate("$.candidate", p.Candidate)
	if err != nil {
		return nil, nil, fromDecoder(CheckEnvelope, err)
	}
	req, err := document.DecodeRequest("$.request", p.Request)
	if err != nil {
		return nil, nil, fromDecoder(CheckEnvelope, err)
	}
	if want := subjects.Approval(req.KeyScope(), req.IntentID); subject != "" && subject != want {
		return nil, nil, refuse(CheckEnvelope, "$.request.intent_id",
			"the message was published on %q, but intent %q of scope %q is published on %q: an approval counts only on its own key's subject", subject, req.IntentID, req.KeyScope(), want)
	}
	return cand, req, nil
}

// decodeApproval decodes the approval member, which must be there and be
// an approval, not another kind of document.
func decodeApproval(member any) (*document.Approval, error) {
	if member == nil {
		return nil, refuse(CheckApprovalFormat, "$.approval", "the message carries no approval; a person must approve the request (publisher approve) before it is sent")
	}
	if m, ok := member.(map[string]any); ok {
		if sv, ok := m["schema_version"].(string); ok && sv != document.ApprovalVersion {
			return nil, refuse(CheckApprovalFormat, "$.approval.schema_version",
				"the approval member holds a %q document, not a %q: no other kind of decision passes for an approval", sv, document.ApprovalVersion)
		}
	}
	appr, err := document.DecodeApproval("$.approval", member)
	if err != nil {
		return nil, fromDecoder(CheckApprovalFormat, err)
	}
	return appr, nil
}

// checkCandidateBinding checks that the approval was given for this very
// candidate.
func checkCandidateBinding(appr *document.Approval, cand *document.Candidate, candDigest string) error {
	switch {
	case appr.Candidate.CandidateID != cand.CandidateID:
		return refuse(CheckCandidateBinding, "$.approval.candidate.candidate_id",
			"the approval is for candidate %q, but the message carries candidate %q", appr.Candidate.CandidateID, cand.CandidateID)
	case appr.Candidate.SourceVersion != cand.Source.Version:
		return refuse(CheckCandidateBinding, "$.candidate.source.version",
			"the candidate comes from source version %q, but the approval was given for version %q; review the candidate again", cand.Source.Version, appr.Candidate.SourceVersion)
	case appr.Candidate.Digest != candDigest:
		return refuse(CheckCandidateBinding, "$.candidate",
			"the candidate's digest is %s, but the approval was given for %s: the candidate changed after it was approved", candDigest, appr.Candidate.Digest)
	}
	return nil
}

// checkRequestBinding checks that the approval was given for this very
// request, and that the request points at the message's candidate.
func checkRequestBinding(appr *document.Approval, req *document.Request, cand *document.Candidate, candDigest, reqDigest string) error {
	switch {
	case appr.Request.RequestID != req.RequestID:
		return refuse(CheckRequestBinding, "$.approval.request.request_id",
			"the approval is for request %q, but the message carries request %q", appr.Request.RequestID, req.RequestID)
	case appr.Request.Digest != reqDigest:
		return refuse(CheckRequestBinding, "$.request",
			"the request's digest is %s, but the approval was given for %s: the request was edited after it was approved", reqDigest, appr.Request.Digest)
	case req.CandidateRef.CandidateID != cand.CandidateID:
		return refuse(CheckRequestBinding, "$.request.candidate_ref.candidate_id",
			"the request points at candidate %q, not at the message's candidate %q", req.CandidateRef.CandidateID, cand.CandidateID)
	case req.CandidateRef.CandidateDigest != candDigest:
		return refuse(CheckRequestBinding, "$.request.candidate_ref.candidate_digest",
			"the request points at candidate digest %s, not at the message's candidate (%s)", req.CandidateRef.CandidateDigest, candDigest)
	case req.CandidateRef.SourceVersion != cand.Source.Version:
		return refuse(CheckRequestBinding, "$.request.candidate_ref.source_version",
			"the request points at source version %q, not at the candidate's %q", req.CandidateRef.SourceVersion, cand.Source.Version)
	}
	return nil
}

// checkCapability checks that the approval grants exactly the capability
// of the request's provider.
func checkCapability(appr *document.Approval, req *document.Request) error {
	// The decoder has checked that the provider is a known one.
	capability, _ := document.CapabilityOf(req.Provider)
	if len(appr.Capabilities) != 1 || appr.Capabilities[0] != capability {
		return refuse(CheckCapability, "$.approval.capabilities",
			"the request is for provider %q, so the capabilities must be exactly [%q], not %q", req.Provider, capability, appr.Capabilities)
	}
	return nil
}

// checkScope checks that the signer may approve the request's scope. The
// scope is part of what was approved (the request digest binds it), and a
// signer may approve only the scopes the trusted-approvers file gives it.
// An unsigned approval (insecure mode) names no signer whose scopes could
// be looked up: it skips this check, as it skips signature.
func checkScope(signer *sign.Approver, req *document.Request) error {
	if signer != nil && !signer.MayApprove(req.KeyScope()) {
		return refuse(CheckScope, "$.request.scope",
			"the request is for scope %q, but its approver %q (key %s) is trusted only for the scopes %s; ask a reviewer trusted for %q to approve it, or have the trusted-approvers file grant that scope (publisher trust --scope)",
			req.KeyScope(), signer.Name, signer.KeyID, quoteList(signer.ScopeList()), req.KeyScope())
	}
	return nil
}

// quoteList names scopes for a reason: "default", "team-a".
func quoteList(scopes []string) string {
	q := make([]string, len(scopes))
	for i, s := range scopes {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
