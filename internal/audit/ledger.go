package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/ledger"
)

// This file holds ledger-entries-approved: every entry of the executors'
// intent ledger (package ledger) binds a key to the request digest of an
// approval the APPROVALS stream holds.
//
// The executors write an entry only after the gate passed a delivery of an
// approval of its key, with that approval's request digest; later calls
// for the key keep its digest (the first binding stays) and may renew it
// with a later not_after. An entry written from outside the executors'
// calls (the executor role, which may write the bucket, forging one before
// the real approval runs) makes that approval end idempotency_conflict and
// its task never be created. What verify can see: the stream keeps a
// message its max age, and an entry lives until its latest not_after plus
// the stream's max age, the clock allowance and the margin, so an honest
// entry outlives its approval. The bucket keeps one revision per key and
// the time it stored it; the approval behind that revision was stored
// before it. An entry whose latest revision is older than the stream's max
// age may stand on an approval that aged out: it is counted as before the
// window, not reported. One written since, with no approval of its key and
// digest held, is reported, naming its key, digest, task, revision and
// when it was written. As for a receipt whose message is gone, an entry
// written by a late delivery of a message that has aged out since, less
// than the max age ago, cannot be told from a forgery and is reported. A conflicting approval renews an entry too (its not_after is
// then that approval's deadline): an entry whose first approval aged out
// and that a later conflicting approval renewed is reported, saying so.
// Entries in the probe's or the demo's scope for a key no message of the
// pipeline names are the tools' (they write the ledger without an
// approval): counted apart.

// LedgerRead is the executors' intent ledger as Load read it.
type LedgerRead struct {
	Entries []ledger.Stored
	// Unread says why the ledger could not be read; empty when it was.
	Unread string
}

// ledgerOpenTimeout bounds opening the ledger's bucket: a deployment that
// does not let the audit's user reach it answers no request at all.
const ledgerOpenTimeout = 10 * time.Second

// readLedger reads every entry of the intent ledger on js, or says why it
// could not.
func readLedger(ctx context.Context, js jetstream.JetStream) *LedgerRead {
	octx, cancel := context.WithTimeout(ctx, ledgerOpenTimeout)
	_, err := js.KeyValue(octx, ledger.Bucket)
	cancel()
	if err != nil {
		return &LedgerRead{Unread: fmt.Sprintf("opening bucket %s: %v", ledger.Bucket, err)}
	}
	entries, err := ledger.Entries(ctx, js)
	if err != nil {
		return &LedgerRead{Unread: err.Error()}
	}
	return &LedgerRead{Entries: entries}
}

// heldApproval is an approval message the stream holds that passes the
// gate: the digest and deadline a call for it carries.
type heldApproval struct {
	seq      uint64
	digest   string
	deadline time.Time
}

// checkLedgerApproved makes ledger-entries-approved.
func checkLedgerApproved(c *Check, v *view) {
	l := v.in.Ledger
	switch {
	case l == nil:
		c.NotApplicable = "the intent ledger was not read"
		return
	case l.Unread != "":
		c.NotApplicable = "the intent ledger could not be read: " + l.Unread
		return
	}
	approvals := map[key][]heldApproval{}
	for _, seq := range sortedKeys(v.msgs) {
		m := v.msgs[seq]
		if m.hasData && m.gateErr == nil && m.id.IntentID != "" {
			k := keyOf(m.id.Scope, m.id.IntentID)
			approvals[k] = append(approvals[k], heldApproval{seq: seq, digest: m.digest, deadline: keylife.Deadline(m.notAfter, v.in.Stream.MaxAge)})
		}
	}
	pipeline := pipelineKeys(v.in, v)
	var backed, before, tools, unbacked int
	for _, s := range l.Entries {
		where := fmt.Sprintf("ledger entry %s (bucket %s, revision %d, written %s)", s.Key, ledger.Bucket, s.Revision, s.Written.UTC().Format(time.RFC3339))
		if s.Bad != "" {
			unbacked++
			c.violate("%s is not an entry of its key: %s", where, s.Bad)
			continue
		}
		e := s.Entry
		k := keyOf(e.Scope, e.IntentID)
		held := approvals[k]
		_, toolScope := MarkOf(k.scope)
		switch {
		case backs(held, e.RequestDigest):
			backed++
		case v.in.Stream.MaxAge > 0 && s.Written.Before(v.now.Add(-v.in.Stream.MaxAge)):
			before++
		case toolScope && !pipeline[k.String()]:
			tools++
		default:
			unbacked++
			c.violate("%s binds %s to request digest %s and task %s, and no approval the stream holds stands behind it: %s",
				where, k, e.RequestDigest, e.TaskID, whyUnbacked(held, e.NotAfter, v.in.Stream.MaxAge))
		}
	}
	c.fig("entries in the intent ledger", len(l.Entries))
	c.fig("of which an approval held stands behind (its key and request digest)", backed)
	c.fig("of which written before the window (their approvals may have aged out; excluded)", before)
	c.fig("of which in the probe's or the demo's scope, for a key the pipeline never carried (excluded)", tools)
	c.fig("of which no approval stands behind", unbacked)
}

// backs says whether one of the approvals held has digest.
func backs(held []heldApproval, digest string) bool {
	for _, a := range held {
		if a.digest == digest {
			return true
		}
	}
	return false
}

// whyUnbacked says what the stream holds of an entry's key: nothing, or
// approvals with other digests (whose calls then end
// idempotency_conflict).
func whyUnbacked(held []heldApproval, notAfter time.Time, maxAge time.Duration) string {
	if len(held) == 0 {
		return fmt.Sprintf("the stream holds no approval of its key, and the entry is younger than the stream's max age %s", maxAge)
	}
	var msgs []string
	renewed := ""
	for _, a := range held {
		msgs = append(msgs, fmt.Sprintf("message %d with %s", a.seq, a.digest))
		if !notAfter.IsZero() && notAfter.Equal(a.deadline) && renewed == "" {
			renewed = fmt.Sprintf(" (message %d's call renewed the entry: unless an approval with the entry's digest aged out before it, the entry was forged)", a.seq)
		}
	}
	return fmt.Sprintf("the approvals of its key carry other request digests (%s), so they end idempotency_conflict%s", strings.Join(msgs, ", "), renewed)
}
