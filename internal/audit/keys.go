package audit

import (
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// This file holds what the checks need to know about keys: a key is the
// pair (scope, intent id), as the task service keeps it; it is compacted
// once its deadline has passed, and request and create records are
// retired after the service's records retention.
//
// A key's deadline, as the audit works it out for one approval message, is
// the approval's not_after plus the APPROVALS stream's max age as
// provisioned (keylife.Deadline: the gate judges expiry at the time the
// stream stored a message, so a message stored just before not_after can
// be delivered until then) plus the service's clock allowance and margin.
// The service keeps a key until the latest not_after it has seen for it
// plus the allowance and the margin, which is never earlier. So a key whose
// record is gone after that deadline was compacted on time: it is outside
// the audit window, counted, not a violation. A key gone before it was
// forgotten while an approval could still resend it: a violation. An
// approval that never expires (unsigned), or a stream that keeps messages
// forever, has no deadline: its key must be kept forever.

// key is one key of the task service: (scope, intent id).
type key struct{ scope, intent string }

// keyOf is the key of a record or receipt; an empty scope (a record or a
// receipt written before keys had scopes) is the default scope.
func keyOf(scope, intent string) key {
	if scope == "" {
		scope = document.DefaultScope
	}
	return key{scope, intent}
}

func (k key) String() string { return fmt.Sprintf("intent %q in scope %q", k.intent, k.scope) }

// receiptKey is the key a receipt names.
func receiptKey(r *document.Receipt) key { return keyOf(r.Scope, deref(r.IntentID)) }

// Lifetime is how long the task service keeps keys and records, as its
// stats reply states it (provider.Lifetime).
type Lifetime struct {
	// ClockAllowance and Margin are added to a key's latest not_after.
	ClockAllowance time.Duration `json:"key_clock_allowance"`
	Margin         time.Duration `json:"key_margin"`
	// RecordsRetention is how long request and create records are kept;
	// zero keeps them forever.
	RecordsRetention time.Duration `json:"records_retention"`
	// Assumed says the service did not state its lifetime, so the
	// defaults were assumed.
	Assumed bool `json:"assumed,omitempty"`
}

// serviceLifetime reads the lifetime from a stats reply; a service that
// does not state it is assumed to use the defaults.
func serviceLifetime(si provider.Info) (Lifetime, error) {
	if si.Lifetime == nil {
		return Lifetime{ClockAllowance: provider.DefaultKeyClockAllowance, Margin: provider.DefaultKeyMargin, Assumed: true}, nil
	}
	a, m, r, err := si.Lifetime.Durations()
	if err != nil {
		return Lifetime{}, fmt.Errorf("audit: reading the task service's key lifetime: %w", err)
	}
	return Lifetime{ClockAllowance: a, Margin: m, RecordsRetention: r}, nil
}

// keyDeadline is when a key that message seq's approval used may have
// been compacted at the earliest; ok is false when it must be kept
// forever, or when the message's approval cannot be read.
func (v *view) keyDeadline(seq uint64) (time.Time, bool) {
	m, held := v.msgs[seq]
	if !held || m.notAfter.IsZero() {
		return time.Time{}, false
	}
	d := keylife.Deadline(m.notAfter, v.in.Stream.MaxAge)
	if d.IsZero() {
		return time.Time{}, false
	}
	return d.Add(v.in.Lifetime.ClockAllowance + v.in.Lifetime.Margin), true
}

// requestDeadline is when the key of a request record may have been
// compacted at the earliest: the not_after the call carried (the
// executor's key deadline) plus the allowance and the margin.
func (v *view) requestDeadline(r provider.RequestRecord) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, r.NotAfter)
	if r.NotAfter == "" || err != nil {
		return time.Time{}, false
	}
	return t.Add(v.in.Lifetime.ClockAllowance + v.in.Lifetime.Margin), true
}

// compactable says whether a key whose deadline is d (ok false: none) may
// have been compacted by now.
func (v *view) compactable(d time.Time, ok bool) bool { return ok && d.Before(v.now) }

// retirable says whether a record made at or after at (its earliest
// possible time) may have been retired by the records retention by now:
// the service retires records older than its retention, by its own clock,
// which may run ahead of the audit's by the clock allowance.
func (v *view) retirable(at time.Time) bool {
	r := v.in.Lifetime.RecordsRetention
	return r > 0 && !at.IsZero() && at.Before(v.now.Add(v.in.Lifetime.ClockAllowance-r))
}

// messageStored is when message seq was stored, as the stream or its
// receipts say; zero when unknown.
func (v *view) messageStored(seq uint64) time.Time {
	if m, ok := v.in.Approvals[seq]; ok && !m.Stored.IsZero() {
		return m.Stored
	}
	if t, ok := v.stored[seq]; ok {
		return t
	}
	return v.earliest[seq]
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
