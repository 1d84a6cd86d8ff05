package audit

import (
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// approval message it names, and defines the window the audit covers.
//
// The window is the APPROVALS stream as read: sequences FirstSeq..LastSeq.
// Its MaxAge is the one provisioned (Input.Stream.MaxAge), never the one
// the stream says now: a MaxAge lowered since would otherwise excuse as
// aged out what was removed.
// A call or receipt naming a sequence below FirstSeq that the stream no
// longer holds is "before the window" when the earliest record of that
// message (a call's received_at, a receipt's issued_at) is older than the
// stream's MaxAge: a message is stored before anything is done with it, so
// it was older than MaxAge too and aged out. (A receipt's time is when the
// RECEIPTS stream stored it, not the issued_at its writer claims, where
// Load could read it.) Such records are excluded from
// the checks and counted. When the message is gone but its earliest record
// is younger than MaxAge (or the stream keeps messages forever), it was
// purged or deleted, not aged out: a violation. A sequence above LastSeq but
// not above the stream's last sequence once everything else was read is a
// message stored while the audit read ("after the window", excluded and
// counted); one above both was never stored.

type place int

const (
	inWindow place = iota
	beforeWindow
	afterWindow
	missing
)

// msgView is one stored message as the checks see it.
type msgView struct {
	id      document.Identity
	hasData bool
	// digest is the request's recomputed digest; empty when the request
	// cannot be read.
	digest string
	// gateErr is the re-run gate's refusal, nil when the message passes.
	gateErr error
	// notAfter is the approval's expiry when the message passes the gate;
	// zero when it never expires or is not known.
	notAfter time.Time
}

// view is the input with every message's gate verdict and every named
// sequence's place in the window worked out once.
type view struct {
	in                     *Input
	opts                   Options
	now                    time.Time
	first, last, lastAfter uint64
	msgs                   map[uint64]*msgView
	earliest               map[uint64]time.Time
	// stored is, per message, when the stream stored it, as its receipts
	// say (delivery.stored_at).
	stored map[uint64]time.Time
	// ledgerBinds holds what the intent ledger's entries bind (vouched),
	// gathered on first use.
	ledgerBinds map[ListedTask]bool
}

func newView(in *Input, o Options) *view {
	v := &view{in: in, opts: o, now: in.Now, msgs: map[uint64]*msgView{}, earliest: map[uint64]time.Time{}, stored: map[uint64]time.Time{}}
	if v.now.IsZero() {
		v.now = time.Now()
	}
	for seq, id := range in.Messages {
		v.msgs[seq] = &msgView{id: id}
	}
	for seq, m := range in.Approvals {
		mv, ok := v.msgs[seq]
		if !ok {
			mv = &msgView{id: document.Identify(m.Data)}
			v.msgs[seq] = mv
		}
		mv.hasData = true
		verdict, err := o.recheck(m.Subject, m.Data, m.Stored)
		if err != nil {
			mv.gateErr = err
			mv.digest = requestDigest(m.Data)
		} else {
			mv.digest = verdict.RequestDigest
			mv.notAfter = verdict.NotAfter
		}
	}
	v.first, v.last, v.lastAfter = in.Stream.FirstSeq, in.Stream.LastSeq, in.Stream.LastSeqAfter
	if in.Stream == (StreamState{}) {
		// No stream state (an Input built by hand): the window is the
		// messages held.
		v.first, v.last = 1, 0
		if seqs := sortedKeys(v.msgs); len(seqs) > 0 {
			v.first, v.last = seqs[0], seqs[len(seqs)-1]
		}
	}
	v.lastAfter = max(v.lastAfter, v.last)
	note := func(seq uint64, at string) {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return
		}
		if e, ok := v.earliest[seq]; !ok || t.Before(e) {
			v.earliest[seq] = t
		}
	}
	for _, r := range in.Requests {
		if seq, _, ok := topology.ParseCallRef(r.CallRef); ok {
			note(seq, r.ReceivedAt)
		}
	}
	for seq, rs := range in.Receipts {
		for _, r := range rs {
			if t, err := time.Parse(time.RFC3339Nano, r.Delivery.StoredAt); err == nil {
				v.stored[seq] = t
			}
		}
		if t, ok := in.ReceiptsStored[seq]; ok {
			note(seq, t.UTC().Format(time.RFC3339Nano))
			continue
		}
		for _, r := range rs {
			note(seq, r.IssuedAt)
		}
	}
	return v
}

// requestDigest recomputes the digest of an envelope's request member, or
// returns "" when there is none to read.
func requestDigest(data []byte) string {
	parts, err := document.SplitEnvelope(data)
	if err != nil || parts.Request == nil {
		return ""
	}
	d, err := canon.DigestTree(parts.Request)
	if err != nil {
		return ""
	}
	return d
}

// place says where a named stream sequence lies relative to the window.
func (v *view) place(seq uint64) place {
	if _, ok := v.msgs[seq]; ok {
		return inWindow
	}
	if seq > v.last && seq <= v.lastAfter {
		return afterWindow
	}
	if seq != 0 && seq < v.first && v.in.Stream.MaxAge > 0 {
		// Aged out when the message was stored longer than MaxAge ago: its
		// receipts say when it was stored; without that, its earliest record
		// stands in (a message handled late looks younger than it is).
		t, ok := v.stored[seq]
		if !ok {
			t, ok = v.earliest[seq]
		}
		if ok && t.Before(v.now.Add(-v.in.Stream.MaxAge)) {
			return beforeWindow
		}
	}
	return missing
}

// whyMissing explains a sequence the stream does not hold.
func (v *view) whyMissing(seq uint64) string {
	switch {
	case seq == 0:
		return "sequence 0, which no stream message has"
	case seq > v.lastAfter:
		return fmt.Sprintf("beyond the stream's last sequence %d: no such message was stored in it", v.lastAfter)
	case seq >= v.first:
		return fmt.Sprintf("deleted from the stream, which holds sequences %d to %d", v.first, v.last)
	case v.in.Stream.MaxAge <= 0:
		return fmt.Sprintf("removed from the stream (its first sequence is %d), which keeps messages forever: purged or deleted", v.first)
	default:
		return fmt.Sprintf("removed from the stream (its first sequence is %d) although its records are younger than the stream's max age %s: purged or deleted, not aged out",
			v.first, v.in.Stream.MaxAge)
	}
}

// Window is the part of the history the checks could see: the messages the
// APPROVALS stream held when it was read. The records of messages that aged
// out before it, and of messages stored while the audit read, are excluded
// from the checks and counted here.
type Window struct {
	Stream   string `json:"stream"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Messages int    `json:"messages"`
	// MaxAge is the stream's MaxAge as provisioned ("unlimited" when
	// messages never age out), whatever the stream says now.
	MaxAge string `json:"max_age"`
	// MaxAgeFrom says where MaxAge was read: "as provisioned", or the
	// topology's default when there is no record of what was provisioned.
	MaxAgeFrom string `json:"max_age_from,omitempty"`
	AuditedAt  string `json:"audited_at"`
	// Since is AuditedAt - MaxAge: a message whose records are all older
	// may have aged out; one whose records are younger may not.
	Since        string   `json:"since,omitempty"`
	BeforeWindow Excluded `json:"before_window"`
	AfterWindow  Excluded `json:"after_window"`
}

// Excluded counts the records of messages outside the window.
type Excluded struct {
	Messages int `json:"messages"`
	Calls    int `json:"calls"`
	Receipts int `json:"receipts"`
}

func (v *view) window() Window {
	w := Window{Stream: topology.ApprovalsStream, FirstSeq: v.first, LastSeq: v.last, Messages: len(v.msgs),
		MaxAge: "unlimited", MaxAgeFrom: v.in.Stream.MaxAgeFrom, AuditedAt: v.now.UTC().Format(time.RFC3339)}
	if age := v.in.Stream.MaxAge; age > 0 {
		w.MaxAge = age.String()
		w.Since = v.now.Add(-age).UTC().Format(time.RFC3339)
	}
	count := func(seq uint64, calls, receipts int, seen map[uint64]bool) {
		var e *Excluded
		switch v.place(seq) {
		case beforeWindow:
			e = &w.BeforeWindow
		case afterWindow:
			e = &w.AfterWindow
		default:
			return
		}
		if !seen[seq] {
			seen[seq] = true
			e.Messages++
		}
		e.Calls += calls
		e.Receipts += receipts
	}
	seen := map[uint64]bool{}
	for _, r := range v.in.Requests {
		if seq, _, ok := topology.ParseCallRef(r.CallRef); ok {
			count(seq, 1, 0, seen)
		}
	}
	for seq, rs := range v.in.Receipts {
		count(seq, 0, len(rs), seen)
	}
	return w
}
