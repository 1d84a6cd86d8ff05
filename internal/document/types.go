package document

import "github.com/sendtwice/sendtwice/taskservice"

// Schema versions of the documents.
const (
	CandidateVersion = "action-candidate.v1"
	RequestVersion   = "task-request.v1"
	ApprovalVersion  = "task-approval.v1"
	EnvelopeVersion  = "task-envelope.v1"
	ReceiptVersion   = "task-receipt.v1"
)

// Fixed values of a task request.
const OperationCreateTask = "create_task"

// Providers: the task service a request is for (its "provider" member).
const (
	ProviderFake    = "fake-task-provider.v1"
	ProviderCalDAV  = "caldav-task.v1"
	ProviderRedmine = "redmine-issue.v1"
)

// Capabilities: an approval grants exactly the one of its request's
// provider (CapabilityOf).
const (
	CapabilityCreateFakeTask     = "create_fake_task"
	CapabilityCreateCalDAVTask   = "create_caldav_task"
	CapabilityCreateRedmineIssue = "create_redmine_issue"
)

// Providers lists the known providers, each with the one capability an
// approval of a request for it grants.
var Providers = []struct{ Provider, Capability string }{
	{ProviderFake, CapabilityCreateFakeTask},
	{ProviderCalDAV, CapabilityCreateCalDAVTask},
	{ProviderRedmine, CapabilityCreateRedmineIssue},
}

// CapabilityOf returns the capability an approval of a request for
// provider grants, and false for an unknown provider.
func CapabilityOf(provider string) (string, bool) {
	for _, p := range Providers {
		if p.Provider == provider {
			return p.Capability, true
		}
	}
	return "", false
}

// ProviderNames lists the known providers, for a reason that names them.
func ProviderNames() []string {
	names := make([]string, len(Providers))
	for i, p := range Providers {
		names[i] = p.Provider
	}
	return names
}

// DefaultDestination is the destination of a request that names none.
const DefaultDestination = "default"

// MaxDestinationBytes bounds a destination name's length.
const MaxDestinationBytes = 63

// ValidDestination reports whether s may name a destination: 1 to
// MaxDestinationBytes bytes of lower-case ASCII letters, digits, '-' and
// '_', starting with a letter (^[a-z][a-z0-9_-]{0,62}$).
func ValidDestination(s string) bool {
	if s == "" || len(s) > MaxDestinationBytes || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Receipt outcomes: the task service's three (taskservice.Outcome), the
// executor's two, which end a message's life (Terminal), and in_doubt,
// which does not: the service refused to call while an earlier call for
// the key may still land (taskservice.ErrInDoubt), and the message comes
// back after the receipt's DecidedAfter.
const (
	OutcomeCreated      = string(taskservice.Created)
	OutcomeReplayed     = string(taskservice.Replayed)
	OutcomeConflict     = string(taskservice.Conflict)
	OutcomeRejected     = "rejected"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeInDoubt      = "in_doubt"
)

// Candidate says "the transcript contains this, from this source version". It
// is checked model output, never a permission.
type Candidate struct {
	SchemaVersion string     `json:"schema_version"`
	CandidateID   string     `json:"candidate_id"`
	Source        Source     `json:"source"`
	Kind          string     `json:"kind"`
	Summary       string     `json:"summary"`
	SpeakerRef    *string    `json:"speaker_ref"`
	Evidence      []Evidence `json:"evidence"`
}

// Source names the transcript and its version.
type Source struct {
	TranscriptID string `json:"transcript_id"`
	Version      string `json:"version"`
}

// Evidence is a quote from the transcript with its time span.
type Evidence struct {
	Quote   string `json:"quote"`
	StartMS int64  `json:"start_ms"`
	EndMS   int64  `json:"end_ms"`
}

// Request says what to create, keyed by the caller's intent id.
type Request struct {
	SchemaVersion string `json:"schema_version"`
	RequestID     string `json:"request_id"`
	IntentID      string `json:"intent_id"`
	Operation     string `json:"operation"`
	Provider      string `json:"provider"`
	// Destination names the place among those its provider's executors
	// serve (a calendar, a project) where the task is to be made. Empty
	// when the document names none; such a request is for
	// DefaultDestination. The approval binds it with the request's digest.
	Destination string `json:"destination,omitempty"`
	// Scope is the caller scope (a team, tenant or account) in which the
	// intent id is a key: the task service remembers the pair. Empty when
	// the document names none; such a request lands in DefaultScope.
	Scope        string       `json:"scope,omitempty"`
	CandidateRef CandidateRef `json:"candidate_ref"`
	Task         Task         `json:"task"`
}

// DestinationName is the destination the request is for: its
// Destination, or DefaultDestination when it names none.
func (r *Request) DestinationName() string {
	if r.Destination == "" {
		return DefaultDestination
	}
	return r.Destination
}

// DefaultScope is the caller scope of a request that names none.
const DefaultScope = taskservice.DefaultScope

// MaxScopeBytes bounds a scope's length.
const MaxScopeBytes = taskservice.MaxScopeBytes

// KeyScope is the scope in which the request's intent id is a key: its
// Scope, or DefaultScope when it names none.
func (r *Request) KeyScope() string {
	if r.Scope == "" {
		return DefaultScope
	}
	return r.Scope
}

// ValidScope reports whether s may name a caller scope: 1 to MaxScopeBytes
// bytes of lower-case ASCII letters, digits, '-' and '_', starting with a
// letter or digit. A scope is one NATS subject token as it is.
func ValidScope(s string) bool { return taskservice.ValidScope(s) }

// CandidateRef points a request at the candidate it was proposed from.
type CandidateRef struct {
	CandidateID     string `json:"candidate_id"`
	CandidateDigest string `json:"candidate_digest"`
	SourceVersion   string `json:"source_version"`
}

// Task is the content to create. Unknown values stay null.
type Task struct {
	Title             string  `json:"title"`
	AssigneePersonRef *string `json:"assignee_person_ref"`
	// DueAt is an RFC 3339 date-time, or an RFC 3339 full-date
	// (2026-12-24) for a task due on a day, not at a time.
	DueAt *string `json:"due_at"`
}

// Approval is a reviewer's permission decision over one candidate and one
// request, with the capabilities granted.
type Approval struct {
	SchemaVersion string            `json:"schema_version"`
	ApprovalID    string            `json:"approval_id"`
	ApprovedBy    string            `json:"approved_by"`
	ApprovedAt    string            `json:"approved_at"`
	Candidate     ApprovedCandidate `json:"candidate"`
	Request       ApprovedRequest   `json:"request"`
	Capabilities  []string          `json:"capabilities"`
	// KeyID, NotAfter and Signature are present together on a signed
	// approval and absent on an unsigned one. Signature is Ed25519ctx over
	// the canonical digest of the approval without its signature member.
	KeyID     string `json:"key_id,omitempty"`
	NotAfter  string `json:"not_after,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// Signed reports whether the approval carries a signature.
func (a *Approval) Signed() bool { return a.Signature != "" }

// ApprovedCandidate binds an approval to a candidate's id, digest and source version.
type ApprovedCandidate struct {
	CandidateID   string `json:"candidate_id"`
	Digest        string `json:"digest"`
	SourceVersion string `json:"source_version"`
}

// ApprovedRequest binds an approval to a request's id and digest.
type ApprovedRequest struct {
	RequestID string `json:"request_id"`
	Digest    string `json:"digest"`
}

// Envelope is one approved request on the stream: three documents, never merged.
type Envelope struct {
	SchemaVersion string    `json:"schema_version"`
	Candidate     Candidate `json:"candidate"`
	Request       Request   `json:"request"`
	Approval      *Approval `json:"approval,omitempty"`
}

// Receipt is the executor's observation of what happened to one delivery.
type Receipt struct {
	SchemaVersion string  `json:"schema_version"`
	ReceiptID     string  `json:"receipt_id"`
	Outcome       string  `json:"outcome"`
	IntentID      *string `json:"intent_id"`
	// Scope is the caller scope in which the intent id is a key (the
	// request's scope, DefaultScope when it names none), on receipts whose
	// request was read; absent otherwise, and on receipts issued before
	// keys had scopes.
	Scope      string  `json:"scope,omitempty"`
	RequestID  *string `json:"request_id"`
	ApprovalID *string `json:"approval_id"`
	TaskID     *string `json:"task_id"`
	// TaskDeleted is true on a replayed receipt whose task was deleted
	// (by its owner) after it was created: the key outlived the task, and
	// nothing was created again. Absent otherwise.
	TaskDeleted bool       `json:"task_deleted,omitempty"`
	Rejection   *Rejection `json:"rejection"`
	Failure     *Failure   `json:"failure"`
	Counts      *Counts    `json:"counts"`
	// StoreID names the task service's store that answered the call (null
	// when the service was not called). Receipts issued before stores had
	// ids lack the member.
	StoreID *string `json:"store_id"`
	// Note says more about the outcome in words, when the task service
	// did (taskservice.Result.Reason): why a conflict is one, which
	// resource a create or a replay found and left alone. At most
	// MaxTextBytes; absent when the service said nothing more.
	Note string `json:"note,omitempty"`
	// DecidedAfter, on an in_doubt receipt only, is when the key stops
	// being in doubt (RFC 3339, UTC): an earlier call may land until then,
	// and a delivery after it may look the key up and create. Absent on
	// every other outcome.
	DecidedAfter string   `json:"decided_after,omitempty"`
	Delivery     Delivery `json:"delivery"`
	IssuedAt     string   `json:"issued_at"`
	// TraceID is the id of the OpenTelemetry trace of the delivery (32
	// lower-case hex digits), when it was traced and sampled; absent
	// otherwise.
	TraceID string `json:"trace_id,omitempty"`
}

// Rejection names the gate check that stopped a message.
type Rejection struct {
	Check  string `json:"check"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// The endings of a dead letter's reason (Failure.Reason): what it means
// for the task. DeadLetterNothingCreated ends one whose task service
// refused the call knowing that it created nothing, DeadLetterRefused one
// whose service refused it for good otherwise: a resend of either is
// refused the same way until its cause is fixed. Only a dead letter whose
// outcome is unknown (deliveries or transient retries ran out) ends
// DeadLetterUnknownOutcome, which says that sending again is safe; one
// whose service held the key in doubt (an earlier call may still have
// landed) ends DeadLetterInDoubt.
const (
	DeadLetterUnknownOutcome = "the task may or may not have been created; sending the same approval again is safe and will say which"
	DeadLetterNothingCreated = "this call created nothing; sending the same approval again will be refused the same way until the cause above is fixed"
	DeadLetterRefused        = "the task service refused this call for good: fix the cause above; sending the same approval again will be refused the same way until then"
	DeadLetterInDoubt        = "an earlier call may have created the task and whether it did is unknown (the task service held its key in doubt); sending the same approval again creates no second task but may be held in doubt the same way: look the task up in the task service first"
)

// Failure says why a message was dead-lettered.
type Failure struct {
	Reason   string `json:"reason"`
	Attempts int64  `json:"attempts"`
}

// Counts are the task service's three counters as of the call.
type Counts = taskservice.Counts

// Delivery says which delivery of which stream message a receipt is for.
type Delivery struct {
	StreamSeq uint64 `json:"stream_seq"`
	Delivered uint64 `json:"delivered"`
	// Attempt identifies this handling of the delivery; the call to the
	// task service carries it too.
	Attempt  string `json:"attempt"`
	Executor string `json:"executor"`
	// StoredAt is when the APPROVALS stream stored the message (RFC 3339,
	// UTC), so that an audit can tell a message that aged out from one that
	// was purged after its stream entry is gone. Receipts issued before it
	// was recorded lack it.
	StoredAt string `json:"stored_at,omitempty"`
}

// Known reports whether a receipt may carry outcome: a terminal one, or
// in_doubt.
func Known(outcome string) bool { return outcome == OutcomeInDoubt || Terminal(outcome) }

// Terminal reports whether an outcome ends a message's life; in_doubt
// does not.
func Terminal(outcome string) bool {
	switch outcome {
	case OutcomeCreated, OutcomeReplayed, OutcomeConflict, OutcomeRejected, OutcomeDeadLettered:
		return true
	}
	return false
}

// Ends returns the approval message a receipt ends, from the message it
// names (its stream sequence, Delivery.StreamSeq, also carried in a stored
// receipt's header) and its outcome, and whether it ends one: only a
// terminal outcome does. Every reader that looks for the receipt of an
// approval message asks here, whether it reads receipts or their headers.
func Ends(named uint64, outcome string) (uint64, bool) {
	if !Terminal(outcome) {
		return 0, false
	}
	return named, true
}

// Of reports whether r is a terminal receipt of the approval message at
// stream sequence seq (see Ends).
func (r *Receipt) Of(seq uint64) bool {
	ended, ok := Ends(r.Delivery.StreamSeq, r.Outcome)
	return ok && ended == seq
}
