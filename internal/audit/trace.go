package audit

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file traces every service call and every receipt back to the stored
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
		if seqs := sortedSeqs(v.msgs); len(seqs) > 0 {
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
		if seq, _, ok := callSeq(r.CallRef); ok {
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
		if seq, _, ok := callSeq(r.CallRef); ok {
			count(seq, 1, 0, seen)
		}
	}
	for seq, rs := range v.in.Receipts {
		count(seq, 0, len(rs), seen)
	}
	return w
}

// GateRun says which of the gate's checks verify re-ran on every message.
type GateRun struct {
	Checks     []string `json:"checks"`
	NotChecked []string `json:"not_checked,omitempty"`
	Note       string   `json:"note"`
}

func describeGate(c *gate.Checker, serves bool) GateRun {
	if c == nil {
		g := GateRun{
			Checks:     []string{gate.CheckEnvelope, gate.CheckApprovalFormat, gate.CheckCandidateBinding, gate.CheckRequestBinding, gate.CheckCapability},
			NotChecked: []string{gate.CheckSignature, gate.CheckExpiry, gate.CheckScope},
			Note: "no trusted approvers given: signatures, expiry and the approvers' scopes are not checked, on signed and unsigned approvals alike; " +
				"every other check is",
		}
		if serves {
			g.Checks = append(g.Checks, gate.CheckDestination)
		} else {
			g.NotChecked = append(g.NotChecked, gate.CheckDestination)
		}
		return g
	}
	life := c.MaxLifetime
	if life == 0 {
		life = gate.DefaultMaxLifetime
	}
	g := GateRun{Checks: slices.Clone(gate.Checks)}
	if c.Serves == nil && !serves {
		// Without the served set the gate skips the destination check.
		g.Checks = slices.DeleteFunc(g.Checks, func(n string) bool { return n == gate.CheckDestination })
		g.NotChecked = []string{gate.CheckDestination}
	}
	g.Note = fmt.Sprintf("signed approvals verified against %d trusted approvers, each for the scopes its entry names; expiry judged at the time the stream stored each message, lifetime at most %s; ",
		c.Keys.Len(), life)
	if c.AllowUnsigned {
		g.Note += "unsigned approvals accepted without a signature, expiry or scope check (insecure-allow-unsigned)"
	} else {
		g.Note += "unsigned approvals refused"
	}
	return g
}

// 7. Every service call names a stored approval message with the same scope,
// intent id and request digest; calls from outside the executors only as
// allowed.
func checkCallsNameMessages(v *view) Check {
	c := Check{N: 7, Name: "every service call names a stored approval message with its scope, intent id and request digest; calls from outside the executors only as allowed", OK: true}
	var matched, gone, before, after int
	var external []string
	for _, r := range v.in.Requests {
		seq, _, ok := callSeq(r.CallRef)
		if !ok {
			external = append(external, fmt.Sprintf("request %d (intent %q, call reference %q)", r.Seq, r.IntentID, r.CallRef))
			continue
		}
		switch v.place(seq) {
		case beforeWindow:
			before++
			continue
		case afterWindow:
			after++
			continue
		case missing:
			gone++
			c.violate("request %d (intent %q, %s) names message %d, %s", r.Seq, r.IntentID, r.CallRef, seq, v.whyMissing(seq))
			continue
		}
		m := v.msgs[seq]
		switch {
		case r.IntentID != m.id.IntentID:
			c.violate("request %d (%s) is for intent %q, but message %d is for intent %q", r.Seq, r.CallRef, r.IntentID, seq, m.id.IntentID)
		case keyOf(r.Scope, "") != keyOf(m.id.Scope, ""):
			c.violate("request %d (%s) is in scope %q, but message %d's request is in scope %q", r.Seq, r.CallRef, keyOf(r.Scope, "").scope, seq, keyOf(m.id.Scope, "").scope)
		case !m.hasData:
			c.violate("request %d (%s): message %d's data was not read, so its request digest is unknown", r.Seq, r.CallRef, seq)
		case m.digest == "":
			c.violate("request %d (%s) reached the service, but message %d has no request that can be read", r.Seq, r.CallRef, seq)
		case r.RequestDigest != m.digest:
			c.violate("request %d (%s) carries request digest %s, but message %d's request digests to %s", r.Seq, r.CallRef, r.RequestDigest, seq, m.digest)
		default:
			matched++
		}
	}
	if len(external) > v.opts.AllowExternal {
		c.violate("%d calls from outside the executors (no call reference naming an APPROVALS delivery), %d allowed (--allow-external)",
			len(external), v.opts.AllowExternal)
		for _, e := range external {
			c.violate("%s came from outside the executors", e)
		}
	}
	c.fig("service calls", len(v.in.Requests))
	c.fig("naming a stored message with its intent and request digest", matched)
	c.fig("naming a message the stream does not hold", gone)
	c.fig("for messages before the window (excluded)", before)
	c.fig("for messages stored while verify read (excluded)", after)
	c.fig("calls from outside the executors", len(external))
	c.fig("calls from outside the executors allowed", v.opts.AllowExternal)
	return c
}

// 8. Every stored receipt decodes and names a stored approval message with
// the ids it carries, and a receipt of the service's answer its scope.
func checkReceiptsNameMessages(v *view) Check {
	c := Check{N: 8, Name: "every stored receipt decodes and names a stored approval message with its scope and intent id", OK: true}
	for _, u := range v.in.Undecodable {
		forMsg := ""
		if u.StreamSeq != 0 {
			forMsg = fmt.Sprintf(" (for message %d)", u.StreamSeq)
		}
		c.violate("the receipt at RECEIPTS sequence %d%s does not decode: %s", u.Seq, forMsg, u.Err)
	}
	var total, matched, gone, before, after int
	for _, seq := range sortedSeqs(v.in.Receipts) {
		rs := v.in.Receipts[seq]
		total += len(rs)
		switch v.place(seq) {
		case beforeWindow:
			before += len(rs)
			continue
		case afterWindow:
			after += len(rs)
			continue
		case missing:
			gone += len(rs)
			for _, r := range rs {
				c.violate("receipt %s (%s, intent %q) names message %d, %s", r.ReceiptID, r.Outcome, deref(r.IntentID), seq, v.whyMissing(seq))
			}
			continue
		}
		m := v.msgs[seq]
		for _, r := range rs {
			ok := true
			mismatch := func(what, got, want string) {
				ok = false
				c.violate("receipt %s (%s) for message %d names %s %q, but the message carries %q", r.ReceiptID, r.Outcome, seq, what, got, want)
			}
			switch {
			case r.IntentID != nil && *r.IntentID != m.id.IntentID:
				mismatch("intent", *r.IntentID, m.id.IntentID)
			case serviceOutcome(r.Outcome) && keyOf(r.Scope, "") != keyOf(m.id.Scope, ""):
				mismatch("scope", keyOf(r.Scope, "").scope, keyOf(m.id.Scope, "").scope)
			case r.IntentID == nil && serviceOutcome(r.Outcome):
				ok = false
				c.violate("receipt %s (%s) for message %d names no intent", r.ReceiptID, r.Outcome, seq)
			case r.RequestID != nil && m.id.RequestID != "" && *r.RequestID != m.id.RequestID:
				mismatch("request", *r.RequestID, m.id.RequestID)
			case r.ApprovalID != nil && m.id.ApprovalID != "" && *r.ApprovalID != m.id.ApprovalID:
				mismatch("approval", *r.ApprovalID, m.id.ApprovalID)
			}
			if ok {
				matched++
			}
		}
	}
	c.fig("receipts", total)
	c.fig("naming a stored message with its ids", matched)
	c.fig("naming a message the stream does not hold", gone)
	c.fig("undecodable receipts", len(v.in.Undecodable))
	c.fig("for messages before the window (excluded)", before)
	c.fig("for messages stored while verify read (excluded)", after)
	return c
}

// 9. Every message that reached the service passes the gate, re-run as the
// executor ran it: on the message's data, with expiry judged at the time the
// stream stored it. A message reached the service when a call names it or a
// receipt reports the service's outcome for it.
func checkGate(v *view) Check {
	c := Check{N: 9, Name: "every message that reached the service passes the gate, re-run at the time the stream stored it", OK: true}
	calls := map[uint64]int{}
	for _, r := range v.in.Requests {
		if seq, _, ok := callSeq(r.CallRef); ok {
			calls[seq]++
		}
	}
	var checked, reached, refused, refusedReached, rejectedPassing int
	for _, seq := range sortedSeqs(v.msgs) {
		m := v.msgs[seq]
		var outcomes []string
		rejected := false
		for _, r := range v.in.Receipts[seq] {
			if serviceOutcome(r.Outcome) {
				outcomes = append(outcomes, r.Outcome)
			}
			rejected = rejected || r.Outcome == document.OutcomeRejected
		}
		didReach := calls[seq] > 0 || len(outcomes) > 0
		if didReach {
			reached++
		}
		if !m.hasData {
			if didReach {
				c.violate("message %d reached the service, but its data was not read: the gate cannot be re-run", seq)
			}
			continue
		}
		checked++
		if m.gateErr == nil {
			if rejected {
				rejectedPassing++
			}
			continue
		}
		refused++
		if !didReach {
			continue
		}
		refusedReached++
		check, why := gate.CheckEnvelope, m.gateErr.Error()
		var ge *gate.Error
		if errors.As(m.gateErr, &ge) {
			check, why = ge.Check, ge.Path+": "+ge.Reason
		}
		c.violate("message %d (intent %q) fails the gate at %s (%s), yet it reached the service: %d calls, receipts [%s]",
			seq, m.id.IntentID, check, why, calls[seq], strings.Join(outcomes, " "))
	}
	c.fig("messages re-checked", checked)
	c.fig("messages that reached the service", reached)
	c.fig("messages the gate refuses", refused)
	c.fig("of which reached the service", refusedReached)
	c.fig("rejected messages the re-run gate lets through", rejectedPassing)
	return c
}

// 10. Each delivery makes at most one call. The executor calls the service
// at most once per delivery, and the server numbers a message's deliveries
// 1, 2, 3, …, so no delivery number of a message may carry two calls, and
// none may exceed the executors' delivery budget; together these bound a
// message's calls by its highest delivery number. A NATS server that lost
// consumer state (a crash before it flushed, a leader change) numbers a
// delivery again; such repeats are accepted only as allowed.
func checkDeliveries(v *view) Check {
	c := Check{N: 10, Name: "each delivery makes at most one call: no delivery number of a message carries two calls or exceeds the executors' delivery budget", OK: true}
	type key struct{ seq, delivered uint64 }
	perDelivery := map[key][]uint64{}
	beyond := map[uint64][]uint64{} // per message, the delivery numbers beyond the budget
	messages := map[uint64]bool{}
	var calls int
	var highest uint64
	for _, r := range v.in.Requests {
		seq, d, ok := callSeq(r.CallRef)
		if !ok {
			continue
		}
		if p := v.place(seq); p == beforeWindow || p == afterWindow {
			continue
		}
		calls++
		messages[seq] = true
		highest = max(highest, d)
		perDelivery[key{seq, d}] = append(perDelivery[key{seq, d}], r.Seq)
		switch {
		case d == 0:
			c.violate("request %d (%s) names delivery 0 of message %d; deliveries count from 1", r.Seq, r.CallRef, seq)
		case v.in.MaxDeliver > 0 && d > uint64(v.in.MaxDeliver):
			beyond[seq] = append(beyond[seq], d)
		}
	}
	for _, seq := range sortedSeqs(beyond) {
		ds := beyond[seq]
		c.violate("message %d: %d calls name deliveries beyond the executors' delivery budget %d (up to delivery %d)", seq, len(ds), v.in.MaxDeliver, slices.Max(ds))
	}
	keys := make([]key, 0, len(perDelivery))
	for k := range perDelivery {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.delivered, b.delivered))
	})
	var repeated int
	var repeats []string
	for _, k := range keys {
		if reqs := perDelivery[k]; len(reqs) > 1 {
			repeated += len(reqs) - 1
			repeats = append(repeats, fmt.Sprintf("message %d: delivery %d made %d calls (requests %v)", k.seq, k.delivered, len(reqs), reqs))
		}
	}
	if repeated > v.opts.AllowRepeatedDeliveries {
		c.violate("%d calls on a delivery number that had already made a call, %d allowed (--allow-repeated-deliveries; only a NATS server that lost consumer state numbers a delivery twice)",
			repeated, v.opts.AllowRepeatedDeliveries)
		for _, r := range repeats {
			c.violate("%s", r)
		}
	}
	c.fig("messages with calls", len(messages))
	c.fig("calls from the executors", calls)
	c.fig("highest delivery number", int(highest))
	c.fig("calls on a repeated delivery number", repeated)
	c.fig("calls on a repeated delivery number allowed", v.opts.AllowRepeatedDeliveries)
	c.fig("delivery budget", v.in.MaxDeliver)
	return c
}

// 11. One store answers. Every receipt of the service's outcome names the
// store that decided the call; a store id other than the audited store's
// means that a second task service instance, with a store of its own,
// answered calls: its creates are not in the audited records, so one intent
// may have been created twice. Receipts stored before receipts named their
// store carry no id and are counted as such.
func checkOneStore(in *Input) Check {
	c := Check{N: 11, Name: "every receipt from the task service names the audited store", OK: true}
	if in.Service.StoreID == "" {
		c.violate("the task service did not name its store")
	}
	others := map[string][]string{}
	var named, unnamed int
	for _, seq := range sortedSeqs(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if !serviceOutcome(r.Outcome) {
				continue
			}
			switch {
			case r.StoreID == nil:
				unnamed++
			case *r.StoreID == in.Service.StoreID || slices.Contains(in.Service.OtherStoreIDs, *r.StoreID):
				named++
			default:
				others[*r.StoreID] = append(others[*r.StoreID], fmt.Sprintf("%s (message %d, %s)", r.ReceiptID, seq, r.Outcome))
			}
		}
	}
	ids := make([]string, 0, len(others))
	for id := range others {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var foreign int
	for _, id := range ids {
		rs := others[id]
		foreign += len(rs)
		why := "a second task service instance answered"
		if in.Listing != nil {
			why = "another scope answered (another collection, or this one under another URL)"
		}
		c.violate("%d receipts name store %s, not the audited store %s: %s (first: %s)",
			len(rs), id, in.Service.StoreID, why, rs[0])
	}
	c.fig("receipts naming the audited store", named)
	if n := len(in.Service.OtherStoreIDs); n > 0 {
		c.fig("audited stores of other destinations", n)
	}
	c.fig("receipts naming another store", foreign)
	c.fig("other stores", len(ids))
	c.fig("receipts without a store id (stored before receipts named it)", unnamed)
	return c
}
