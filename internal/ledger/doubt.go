package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/taskservice"
)

var _ taskservice.Doubts = (*Ledger)(nil)

// DoubtKey is the bucket key of the in-doubt record of (scope, intentID).
func DoubtKey(scope, intentID string) (string, error) {
	return prefixedKey(DoubtPrefix, scope, intentID)
}

// doubtValue is an in-doubt record as stored.
type doubtValue struct {
	Scope    string    `json:"scope"`
	IntentID string    `json:"intent_id"`
	Started  time.Time `json:"started"`
	Until    time.Time `json:"until"`
}

// maxDoubtTries bounds Doubt's tries when a record it found is gone before
// it could read it.
const maxDoubtTries = 4

// Doubt writes the in-doubt record of (scope, intentID) with a create-only
// write carrying a per-key TTL of lifetime (LockTTL rounds it): Started is
// now, Until is now plus lifetime. When the key has a record, nothing is
// written, and that record is returned with an error wrapping
// taskservice.ErrInDoubt. It implements taskservice.Doubts.
func (l *Ledger) Doubt(ctx context.Context, scope, intentID string, lifetime time.Duration) (_ taskservice.Doubt, err error) {
	ctx, span := startSpan(ctx, "ledger doubt", scope, intentID)
	defer func() { endSpan(span, err) }()
	key, err := DoubtKey(scope, intentID)
	if err != nil {
		return taskservice.Doubt{}, err
	}
	for range maxDoubtTries {
		started := l.now().UTC()
		d := taskservice.Doubt{Started: started, Until: started.Add(lifetime)}
		b, err := json.Marshal(doubtValue{Scope: scope, IntentID: intentID, Started: d.Started, Until: d.Until})
		if err != nil {
			return taskservice.Doubt{}, fmt.Errorf("ledger: encoding in-doubt record %s: %w", key, err)
		}
		_, err = l.kv.Create(ctx, key, b, jetstream.KeyTTL(LockTTL(lifetime)))
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return taskservice.Doubt{}, fmt.Errorf("ledger: writing in-doubt record %s: %w", key, err)
		}
		old, found, err := l.Doubted(ctx, scope, intentID)
		if err != nil {
			return taskservice.Doubt{}, err
		}
		if found {
			return old, fmt.Errorf("ledger: in-doubt record %s: a call sent at %s may land until %s: %w",
				key, old.Started.Format(time.RFC3339), old.Until.Format(time.RFC3339), taskservice.ErrInDoubt)
		}
		// Gone since the write was refused (its TTL, a Settle): try again.
	}
	return taskservice.Doubt{}, fmt.Errorf("%w %s (%d tries)", ErrContended, key, maxDoubtTries)
}

// Doubted reads the in-doubt record of (scope, intentID): found is false
// when the key has none. The record lasts as long as the bucket keeps it
// (its TTL, counted by the server), whatever the reader's clock says of
// its Until. A value that is not a record of its key is an error wrapping
// ErrBadEntry, naming the key. It implements taskservice.Doubts.
func (l *Ledger) Doubted(ctx context.Context, scope, intentID string) (_ taskservice.Doubt, _ bool, err error) {
	ctx, span := startSpan(ctx, "ledger doubted", scope, intentID)
	defer func() { endSpan(span, err) }()
	key, err := DoubtKey(scope, intentID)
	if err != nil {
		return taskservice.Doubt{}, false, err
	}
	e, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return taskservice.Doubt{}, false, nil
	}
	if err != nil {
		return taskservice.Doubt{}, false, fmt.Errorf("ledger: reading in-doubt record %s: %w", key, err)
	}
	var v doubtValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Scope != scope || v.IntentID != intentID || v.Until.IsZero() {
		return taskservice.Doubt{}, false, fmt.Errorf("%w: in-doubt record %s is not a record of its key (%q, %q)", ErrBadEntry, key, scope, intentID)
	}
	return taskservice.Doubt{Started: v.Started, Until: v.Until}, true, nil
}

// Settle removes the in-doubt record of (scope, intentID), if it has one:
// a purge conditional on the revision read, so that a record written
// since is left as it is. It implements taskservice.Doubts.
func (l *Ledger) Settle(ctx context.Context, scope, intentID string) (err error) {
	ctx, span := startSpan(ctx, "ledger settle", scope, intentID)
	defer func() { endSpan(span, err) }()
	key, err := DoubtKey(scope, intentID)
	if err != nil {
		return err
	}
	e, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: reading in-doubt record %s: %w", key, err)
	}
	err = l.kv.Purge(ctx, key, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(limitMarkerTTL))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("ledger: settling in-doubt record %s: %w", key, err)
	}
	return nil
}
