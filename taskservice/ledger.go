package taskservice

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultScope is the scope of a request that names none. A Request with
// an empty Scope is in it.
const DefaultScope = "default"

// MaxScopeBytes bounds a scope's length.
const MaxScopeBytes = 64

// ValidScope reports whether s may name a caller scope: 1 to MaxScopeBytes
// bytes of lower-case ASCII letters, digits, '-' and '_', starting with a
// letter or digit. A scope is one NATS subject token as it is. These are
// the rules of the task-request document's scope, kept here once for the
// documents, the executor and the services.
func ValidScope(s string) bool {
	if len(s) == 0 || len(s) > MaxScopeBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// KeyScope is req's scope, or DefaultScope when it names none.
func (req Request) KeyScope() string {
	if req.Scope == "" {
		return DefaultScope
	}
	return req.Scope
}

// DeletedKeys is implemented by an adapter that can say whether its
// service remembers a key after the key's task is deleted by its owner.
// A service that keeps a tombstone (the fake task service: its key
// outlives its task) answers true; one whose key is the task itself (a
// CalDAV resource: a PUT with If-None-Match: * succeeds again once the
// resource is deleted) answers false. An adapter that does not implement
// it is taken to remember its keys, as the contract asks.
type DeletedKeys interface {
	RemembersDeletedKeys() bool
}

// Finder is implemented by an adapter that can look the task of a key up
// without creating anything: KeepDeletedKeys needs it for a service that
// forgets deleted keys.
type Finder interface {
	// Find looks up the task of (req.Scope, req.IntentID). found is false
	// when the service holds none (never created, or deleted); Result may
	// still carry StoreID then. When found, Result is what Create would
	// answer a resend of req: Replayed with the task for the same request
	// digest, Conflict (with Reason where there is more to say) for
	// another. Errors are classified as Create's are.
	Find(ctx context.Context, req Request) (res Result, found bool, err error)
}

// RemembersDeletedKeys reports whether svc says that its service remembers
// a key after its task is deleted; true for a service that does not say.
func RemembersDeletedKeys(svc Service) bool {
	d, ok := svc.(DeletedKeys)
	return !ok || d.RemembersDeletedKeys()
}

// LedgerEntry is what an intent ledger remembers of one key: the pair
// (Scope, IntentID) was bound to TaskID by a call with RequestDigest, and
// may be forgotten only after NotAfter (plus the ledger's allowance for
// clock skew and its margin). A zero NotAfter keeps the entry forever.
type LedgerEntry struct {
	Scope         string
	IntentID      string
	RequestDigest string
	TaskID        string
	NotAfter      time.Time
}

// Ledger remembers keys for a service that forgets them when their task
// is deleted. It must be safe for concurrent use, also with one key.
type Ledger interface {
	// Get returns the entry of (scope, intentID); found is false when the
	// ledger holds none (never written, or expired).
	Get(ctx context.Context, scope, intentID string) (e LedgerEntry, found bool, err error)
	// Put records e. When the key already has an entry, its binding (the
	// request digest and the task id) stays as it is, and its NotAfter
	// becomes the later of the two (a zero NotAfter, on either side, keeps
	// the entry forever): a key lives as long as the latest approval seen
	// for it can still pass the gate.
	Put(ctx context.Context, e LedgerEntry) error
}

// ErrForgetsKeys is wrapped by KeepDeletedKeys for a service that forgets
// deleted keys and cannot look a key up (it does not implement Finder).
var ErrForgetsKeys = errors.New("taskservice: the service forgets a key when its task is deleted and offers no lookup")

// KeepDeletedKeys gives svc the behaviour of a service that keeps a
// tombstone: a key outlives its deleted task. A service that remembers
// deleted keys itself (RemembersDeletedKeys) is returned as it is; for one
// that does not, the returned Service consults ledger before every create:
//
//   - the ledger does not know the key → svc.Create; a Created or Replayed
//     answer is written to the ledger before it is returned (a failed write
//     is a transient error: the retry finds the task and writes again);
//   - the ledger knows the key: svc's Finder looks the task up (the call
//     reaches the service, and creates nothing), and with another request
//     digest than the ledger's the answer is Conflict with the ledger's
//     task id; with the same digest, a task present → svc's own answer
//     (Replayed, or Conflict for a resource that is not ours), a task
//     gone → Replayed with the ledger's task id and Result.TaskDeleted,
//     and nothing is created again. A task the service made before it
//     proved its tasks (ErrUnprovenLegacy) is proven from the ledger's
//     entry once (LegacyProver), so that keys made before stay answered.
//
// Every answer for a known key also writes the ledger, so that the entry
// lives as long as the latest approval seen for the key (Ledger.Put).
//
// What it cannot cover: a task deleted between the service's create and
// the ledger write, followed by a resend, is created again (the ledger
// never learned the key).
func KeepDeletedKeys(svc Service, ledger Ledger) (Service, error) {
	if RemembersDeletedKeys(svc) {
		return svc, nil
	}
	f, ok := svc.(Finder)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrForgetsKeys, svc)
	}
	if ledger == nil {
		return nil, errors.New("taskservice: KeepDeletedKeys needs a ledger")
	}
	return &tombstones{svc: svc, find: f, ledger: ledger}, nil
}

type tombstones struct {
	svc    Service
	find   Finder
	ledger Ledger
}

// RemembersDeletedKeys is true: the ledger remembers them.
func (t *tombstones) RemembersDeletedKeys() bool { return true }

// Find is the wrapped service's.
func (t *tombstones) Find(ctx context.Context, req Request) (Result, bool, error) {
	return t.find.Find(ctx, req)
}

// Unwrap returns the wrapped service.
func (t *tombstones) Unwrap() Service { return t.svc }

func (t *tombstones) Create(ctx context.Context, req Request) (Result, error) {
	scope := req.KeyScope()
	e, known, err := t.ledger.Get(ctx, scope, req.IntentID)
	if err != nil {
		return Result{}, Transient(fmt.Errorf("taskservice: reading the intent ledger: %w", err))
	}
	if !known {
		res, err := t.svc.Create(ctx, req)
		if err != nil || (res.Outcome != Created && res.Outcome != Replayed) {
			return res, err
		}
		if err := t.remember(ctx, req, res.TaskID); err != nil {
			return Result{}, err
		}
		return res, nil
	}
	found, present, err := t.findProving(ctx, req, e)
	if err != nil {
		return Result{}, err
	}
	res := found
	switch {
	case e.RequestDigest != req.RequestDigest:
		// Whatever the service holds now: the key is bound to another
		// request.
		res = Result{Outcome: Conflict, TaskID: e.TaskID, StoreID: found.StoreID,
			Reason: "the intent ledger holds this key for another request digest"}
	case !present:
		res = Result{Outcome: Replayed, TaskID: e.TaskID, StoreID: found.StoreID, TaskDeleted: true}
	}
	if err := t.remember(ctx, req, e.TaskID); err != nil {
		return Result{}, err
	}
	return res, nil
}

// ErrUnprovenLegacy is wrapped by a Finder's error when the task at the
// key is one it made before it proved its tasks (an older version of the
// adapter, or one given no mark key): it cannot tell it from one planted
// by a user of the service. KeepDeletedKeys then asks the service's
// LegacyProver to prove it from the ledger's entry, and looks again.
var ErrUnprovenLegacy = errors.New("taskservice: the key's task was made before its service proved its tasks")

// LegacyProver is implemented by an adapter that proves its tasks (a tag
// under the deployment's mark key) and can prove one made before it did:
// ProveLegacy writes the proof into the task of e's key when that task is
// the one e binds (e.TaskID, e.RequestDigest), and changes nothing
// otherwise (an error says why). changed is false when the task was proven
// already.
type LegacyProver interface {
	ProveLegacy(ctx context.Context, e LedgerEntry) (changed bool, err error)
}

// findProving is Find, proving once a task made before proofs that the
// ledger's entry e binds to the key: the ledger, written by the executors
// when the task was created, is what vouches for it. A task whose task id
// or digest is not e's is left unproven, and Find's error stands; when e
// binds a task made with proofs (ProveLegacy changes nothing), the task at
// the older name is not the key's, which is then taken as deleted.
func (t *tombstones) findProving(ctx context.Context, req Request, e LedgerEntry) (Result, bool, error) {
	res, present, err := t.find.Find(ctx, req)
	p, ok := t.svc.(LegacyProver)
	if err == nil || !ok || !errors.Is(err, ErrUnprovenLegacy) {
		return res, present, err
	}
	if _, perr := p.ProveLegacy(ctx, e); perr != nil {
		return res, present, fmt.Errorf("%w; proving it from the intent ledger's entry: %w", err, perr)
	}
	res, present, err = t.find.Find(ctx, req)
	if errors.Is(err, ErrUnprovenLegacy) {
		// The entry binds a task made with proofs, which is gone; what
		// sits at the older name is not it.
		return Result{StoreID: res.StoreID}, false, nil
	}
	return res, present, err
}

// remember writes (or extends) the ledger entry of req's key.
func (t *tombstones) remember(ctx context.Context, req Request, taskID string) error {
	err := t.ledger.Put(ctx, LedgerEntry{Scope: req.KeyScope(), IntentID: req.IntentID,
		RequestDigest: req.RequestDigest, TaskID: taskID, NotAfter: req.NotAfter})
	if err != nil {
		return Transient(fmt.Errorf("taskservice: writing the intent ledger: %w", err))
	}
	return nil
}
