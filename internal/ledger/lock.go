package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/taskservice"
)

// LockPrefix starts the bucket key of every per-key lock: "_lock.", the
// scope, ".", and the intent's token. A scope never starts with '_', so no
// lock key is an entry's key.
const LockPrefix = "_lock."

var _ taskservice.Locker = (*Ledger)(nil)

// LockKey is the bucket key of the lock of (scope, intentID).
func LockKey(scope, intentID string) (string, error) {
	k, err := Key(scope, intentID)
	if err != nil {
		return "", err
	}
	return LockPrefix + k, nil
}

// LockTTL is the lifetime a lock taken for ttl gets: ttl rounded up to a
// whole second (per-key TTLs count in seconds), and at least one second.
func LockTTL(ttl time.Duration) time.Duration {
	if ttl < time.Second {
		return time.Second
	}
	return (ttl + time.Second - 1).Truncate(time.Second)
}

// lockValue says who holds a lock, for whoever reads the bucket.
type lockValue struct {
	Holder  string    `json:"holder"`
	TakenAt time.Time `json:"taken_at"`
	TTL     string    `json:"ttl"`
}

// Lock takes the lock of (scope, intentID) for ttl (LockTTL rounds it),
// with a create-only write of its key with that per-key TTL: when the key
// exists (another holder, whose TTL has not run out) the error wraps
// taskservice.ErrLocked. It implements taskservice.Locker.
func (l *Ledger) Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (taskservice.Lock, error) {
	key, err := LockKey(scope, intentID)
	if err != nil {
		return nil, err
	}
	ttl = LockTTL(ttl)
	var id [8]byte
	rand.Read(id[:])
	start := time.Now() // the lock's lifetime counts from before the write
	b, err := json.Marshal(lockValue{Holder: hex.EncodeToString(id[:]), TakenAt: l.now().UTC(), TTL: ttl.String()})
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding lock %s: %w", key, err)
	}
	rev, err := l.kv.Create(ctx, key, b, jetstream.KeyTTL(ttl))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("ledger: taking lock %s: %w", key, taskservice.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: taking lock %s: %w", key, err)
	}
	return &lock{kv: l.kv, key: key, rev: rev, deadline: start.Add(ttl)}, nil
}

// lock is one held lock: the revision our create wrote.
type lock struct {
	kv       jetstream.KeyValue
	key      string
	rev      uint64
	deadline time.Time // by this process's monotonic clock
}

// Held reads the key: the lock is ours while its latest revision is the
// one we wrote and its TTL has not run out by our own clock (the server
// removes an expired key a little later).
func (k *lock) Held(ctx context.Context) error {
	if !time.Now().Before(k.deadline) {
		return fmt.Errorf("ledger: lock %s: its TTL ran out: %w", k.key, taskservice.ErrLockLost)
	}
	e, err := k.kv.Get(ctx, k.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("ledger: lock %s: the key is gone: %w", k.key, taskservice.ErrLockLost)
	case err != nil:
		return fmt.Errorf("ledger: reading lock %s: %w", k.key, err)
	case e.Revision() != k.rev:
		return fmt.Errorf("ledger: lock %s: revision %d is another holder's (ours was %d): %w", k.key, e.Revision(), k.rev, taskservice.ErrLockLost)
	}
	return nil
}

// Release purges the key only if its latest revision is still ours (a
// conditional write): a lock lost and taken by another since stays as it
// is, and that is not an error.
func (k *lock) Release(ctx context.Context) error {
	err := k.kv.Purge(ctx, k.key, jetstream.LastRevision(k.rev), jetstream.PurgeTTL(limitMarkerTTL))
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil // not ours any more
	}
	if err != nil {
		return fmt.Errorf("ledger: releasing lock %s: %w", k.key, err)
	}
	return nil
}
