package taskservice

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outcome is what a create call did: Created, Replayed or Conflict. A
// receipt carries the same values (and two more of the executor's own).
type Outcome string

// Outcomes of a create call.
const (
	// Created: the service created the task.
	Created Outcome = "created"
	// Replayed: the key was created before; the service returned the first
	// task and created nothing.
	Replayed Outcome = "replayed"
	// Conflict: the key was created before from another request digest;
	// nothing was created or changed.
	Conflict Outcome = "idempotency_conflict"
)

// Task is the content of a task as the approval gives it. Unknown values
// stay nil: an adapter never guesses a person or a date.
type Task struct {
	Title             string
	AssigneePersonRef *string
	DueAt             *string
}

// Request asks for a task, keyed by IntentID; the content is compared by
// RequestDigest ("sha256:" + 64 lower-case hex digits).
type Request struct {
	// Scope is the caller scope (a team, tenant or account) in which
	// IntentID is a key: a service remembers the pair (Scope, IntentID),
	// so two scopes may use one intent id for two tasks, and a replay
	// never answers with another scope's task. The executor always sets
	// it ("default" for a request that names none).
	Scope         string
	IntentID      string
	RequestDigest string
	RequestID     string
	Task          Task
	// Request is the task-request.v1 document the approval covers, as JSON:
	// RequestDigest is "sha256:" over its RFC 8785 canonical form, and
	// IntentID, RequestID and Task are taken from it. A service that must
	// not trust its caller recomputes the digest from it and creates only
	// the task it holds (the fake task service refuses a call whose
	// request does not hash to RequestDigest or whose task, intent id or
	// request id differ from the request's). An adapter that keeps only
	// the digest may ignore it. The executor always sets it.
	Request []byte
	// CallRef names the caller's attempt; the executor sends
	// "APPROVALS:<stream_seq>:<delivery>:<attempt>". A service that keeps a
	// log of calls records it so that an audit can match every call to a
	// message.
	CallRef string
	// Where the task comes from, for services that can keep it beside the
	// task: the candidate's id and its transcript's version, and who
	// approved it.
	CandidateID   string
	SourceVersion string
	ApprovedBy    string
	// What the candidate says, for services that show it beside the task
	// (a description): its summary, its evidence quotes in order, and the
	// transcript it came from. Empty when unknown.
	Summary      string
	Evidence     []string
	TranscriptID string
	// Provider is the task-service kind the request names (its "provider",
	// for example "caldav.v1"), and Destination the name of the place the
	// request is for among those the executor serves ("default" when the
	// request names none). The executor routes a call by them; an adapter
	// serves one destination and may ignore both.
	Provider    string
	Destination string
	// NotAfter is when the approval that carries this call expires: no
	// resend of it passes the gate after that time (judged by the
	// executors' clocks). A service may forget the key only once every
	// approval it has seen for the key has expired, plus an allowance for
	// clock skew. Zero means the approval does not expire (an unsigned
	// approval, accepted only in insecure mode): the key must be kept.
	NotAfter time.Time
}

// Counts are a service's own three counters, for services that keep them.
// The same names, and in JSON the same members, are used wherever the
// counters are shown (a receipt, the fake task service's replies).
type Counts struct {
	RequestsReceived int64 `json:"requests_received"`
	CreatesExecuted  int64 `json:"creates_executed"`
	TasksExisting    int64 `json:"tasks_existing"`
}

// Result answers a create call.
type Result struct {
	// Outcome is Created, Replayed or Conflict.
	Outcome Outcome
	// TaskID names the task the intent id is bound to: the one created, the
	// first one for a replay, and the existing one for a conflict.
	TaskID string
	// StoreID names the scope in which the service remembers keys (a
	// store, a collection), when it can say; two different store ids in one
	// deployment mean two scopes answered.
	StoreID string
	// Counts are the service's counters as of the call; nil when the
	// service keeps none.
	Counts *Counts
	// Reason says more about the outcome in words, when there is more to
	// say: why a call was answered Conflict beyond "another request
	// digest", or, on any outcome, what the service found and did not take
	// as the key's task. The executor carries it, cut to 4096 bytes, in the
	// receipt's note.
	Reason string
	// TaskDeleted, on a Replayed result, says that the task the key is
	// bound to was deleted after it was created (by its owner): the key
	// outlived it, and nothing was created again.
	TaskDeleted bool
}

// Service creates tasks keyed by intent id. Create must be safe to call
// concurrently, also with the same intent id.
type Service interface {
	Create(ctx context.Context, req Request) (Result, error)
}

// Func adapts a function to Service.
type Func func(ctx context.Context, req Request) (Result, error)

// Create calls f.
func (f Func) Create(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// Errors that classify a failed call; test with errors.Is, or IsPermanent.
var (
	ErrTransient = errors.New("taskservice: transient failure")
	ErrPermanent = errors.New("taskservice: permanent failure")
)

// Transient marks err as a failure that a later retry of the same call may
// cure. It returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: ErrTransient}
}

// Permanent marks err as a failure that no retry cures; the executor
// dead-letters the message with err's text as the reason. It returns nil
// for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: ErrPermanent}
}

// ErrNotCreated marks a refusal after which the service knows that the
// call created nothing for its request (NotCreated); test with errors.Is.
var ErrNotCreated = errors.New("taskservice: the call created nothing")

// NotCreated marks err as a refusal after which the service knows that
// nothing was created for the request (its server refused the create, or
// found a resource that is not this request's task at its key), so that a
// resend will be refused the same way until the cause is fixed. Combine it
// with Permanent: Permanent(NotCreated(err)). It returns nil for a nil err.
func NotCreated(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: ErrNotCreated}
}

// IsNotCreated reports whether err was marked NotCreated.
func IsNotCreated(err error) bool { return errors.Is(err, ErrNotCreated) }

// IsPermanent reports whether err was marked Permanent. Every other error,
// marked Transient or not marked at all, is worth a retry.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// ErrInDoubt marks a refusal to call while an earlier call for the same
// key may still land: its outcome is unknown (a timeout, a lost answer, a
// lock that expired while it ran, a caller killed) and the service has not
// shown its task yet. Test with errors.Is, or InDoubtUntil.
var ErrInDoubt = errors.New("taskservice: an earlier call for this key is in doubt")

// InDoubt marks err as ErrInDoubt until the given time: until then an
// earlier call for the key may still land (the service's longest request
// lifetime after it was sent), so nothing may be created; after it, a
// call may look the key up and create. It is also transient: a caller that
// knows nothing of doubt retries it. It returns nil for a nil err.
func InDoubt(err error, until time.Time) error {
	if err == nil {
		return nil
	}
	return &inDoubt{classified: classified{err: err, class: ErrTransient}, until: until}
}

// InDoubtUntil returns the time until which err says its key is in doubt,
// and whether err was marked InDoubt.
func InDoubtUntil(err error) (time.Time, bool) {
	var d *inDoubt
	if errors.As(err, &d) {
		return d.until, true
	}
	return time.Time{}, false
}

type inDoubt struct {
	classified
	until time.Time
}

func (d *inDoubt) Unwrap() []error { return []error{d.err, ErrTransient, ErrInDoubt} }

type classified struct {
	err   error
	class error
}

func (c *classified) Error() string { return c.err.Error() }

func (c *classified) Unwrap() []error { return []error{c.err, c.class} }

// Check reports whether res keeps the contract's form: a known outcome, a
// task id, and TaskDeleted only on a Replayed result (a create or a conflict
// cannot answer for a deleted task). The executor checks every result with it
// and dead-letters the message of a result that fails, as a service that
// does not keep the contract.
func Check(res Result) error {
	switch res.Outcome {
	case Created, Replayed, Conflict:
		if res.TaskID == "" {
			return fmt.Errorf("taskservice: outcome %q without a task id", res.Outcome)
		}
	default:
		return fmt.Errorf("taskservice: unknown outcome %q", res.Outcome)
	}
	if res.TaskDeleted && res.Outcome != Replayed {
		return fmt.Errorf("taskservice: outcome %q says its task was deleted; only a replay can", res.Outcome)
	}
	return nil
}
