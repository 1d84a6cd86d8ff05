package taskservice

import (
	"context"
	"errors"
	"time"
)

// Errors of a Locker, wrapped by its implementations; test with errors.Is.
var (
	// ErrLocked: another holder has the lock of the key now.
	ErrLocked = errors.New("taskservice: another caller holds the key's lock")
	// ErrLockLost: the lock was this holder's, but its TTL ran out and it
	// may now be another's.
	ErrLockLost = errors.New("taskservice: the key's lock was lost")
)

// Locker holds one lock per key (Request.Scope, Request.IntentID) across
// every caller of a service: an adapter for a service that keeps no key
// and has no create-if-absent (an issue tracker: every POST makes a new
// issue) takes the lock, looks the key up, creates only when the lookup
// finds nothing, and releases the lock, so that two callers never both
// conclude "not yet". The executors keep one on JetStream, in the intent
// ledger's bucket. A lock expires by itself after its TTL, so that a
// caller that dies does not block the key for ever; a holder stalled past
// its TTL has lost it (Lock.Held says so), and a create it sends after
// that moment can duplicate the task: the TTL must exceed a lookup plus a
// create's timeout, and the honest limit of the class is a holder paused
// for longer than that between its last Held and its create reaching the
// service.
type Locker interface {
	// Lock takes the lock of (scope, intentID) for ttl. When another
	// holder has it, the error wraps ErrLocked. Other errors are those of
	// the store (transient).
	Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (Lock, error)
}

// Lock is one held lock.
type Lock interface {
	// Held returns nil when the lock is still this holder's, and an error
	// wrapping ErrLockLost when it expired (or was taken by another since).
	// An adapter calls it just before its create.
	Held(ctx context.Context) error
	// Release gives the lock up if it is still this holder's; releasing a
	// lost lock changes nothing and is not an error.
	Release(ctx context.Context) error
}
