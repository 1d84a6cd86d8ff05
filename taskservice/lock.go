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
// its TTL has lost it (Lock.Held says so). A lock alone does not keep a
// create that lands after the lock was lost (a holder paused after its
// last Held, a request held up on the way) from duplicating the task: a
// holder renews a lock that is a Renewer while its create runs, and an
// adapter writes the key's in-doubt record (Doubts) before the create,
// which keeps the key until the create can no longer land.
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

// Renewer is a Lock its holder can keep alive while its call runs, so
// that a call slower than the lock's TTL does not lose it. An adapter
// renews at a fraction of the TTL while its create is in flight.
type Renewer interface {
	// Renew gives the lock its TTL again from now, if it is still this
	// holder's (a write conditional on the holder's last one); when it is
	// not, the error wraps ErrLockLost and nothing is written.
	Renew(ctx context.Context) error
}

// Doubt is a key's in-doubt record: a call for the key was sent at
// Started and may still land until Until (Started plus the service's
// longest request lifetime).
type Doubt struct {
	Started time.Time
	Until   time.Time
}

// Doubts keeps, beside the locks, one in-doubt record per key: a
// write-ahead record that a call whose outcome may stay unknown (a
// timeout, a lost answer, a 5xx, a caller killed) is about to be sent. A
// Locker for an adapter of a service with no key implements it too (the
// executors' intent ledger does; the Redmine adapter requires it). The
// adapter writes the record before its create and settles it once the
// service has answered definitely (created, or refused creating nothing);
// an unknown outcome leaves it until its lifetime has passed, and
// meanwhile a call that finds no task for the key creates nothing and
// answers an error marked InDoubt with the record's Until. The record
// protects the key even when the lock is lost (expired under a slow call,
// or purged) while the call is in flight.
type Doubts interface {
	// Doubt writes the record of (scope, intentID) for lifetime, before a
	// call is sent, and only if the key has none (a create-only write):
	// when it has one, it writes nothing and returns that record with an
	// error wrapping ErrInDoubt.
	Doubt(ctx context.Context, scope, intentID string, lifetime time.Duration) (Doubt, error)
	// Doubted returns the key's record; found is false when it has none
	// (never written, settled, or its lifetime has passed).
	Doubted(ctx context.Context, scope, intentID string) (d Doubt, found bool, err error)
	// Settle removes the key's record, if it has one: the call was
	// answered definitely, was not sent, or its task has been found.
	Settle(ctx context.Context, scope, intentID string) error
}
