package audit

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file traces every service call (calls-name-messages) and every
// receipt (receipts-name-messages, one-store) back to the stored approval
// message it names, and bounds each message's calls by its deliveries
// (one-call-per-delivery).

// checkCallsNameMessages makes calls-name-messages: every service call names a
// stored approval message with the same scope, intent id and request digest;
// calls from outside the executors only as allowed.
func checkCallsNameMessages(c *Check, v *view) {
	var matched, gone, before, after int
	var external []string
	for _, r := range v.in.Requests {
		seq, _, ok := topology.ParseCallRef(r.CallRef)
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
}

// checkReceiptsNameMessages makes receipts-name-messages: every stored receipt
// decodes and names a stored approval message with the ids it carries, and a
// receipt of the service's answer its scope.
func checkReceiptsNameMessages(c *Check, v *view) {
	for _, u := range v.in.Undecodable {
		forMsg := ""
		if u.StreamSeq != 0 {
			forMsg = fmt.Sprintf(" (for message %d)", u.StreamSeq)
		}
		c.violate("the receipt at RECEIPTS sequence %d%s does not decode: %s", u.Seq, forMsg, u.Err)
	}
	var total, matched, gone, before, after int
	for _, seq := range sortedKeys(v.in.Receipts) {
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
}

// checkDeliveries makes one-call-per-delivery: each delivery makes at most one
// call. The executor calls the service at most once per delivery, and the
// server numbers a message's deliveries 1, 2, 3, …, so no delivery number of a
// message may carry two calls, and none may exceed the executors' delivery
// budget; together these bound a message's calls by its highest delivery
// number. A NATS server that lost consumer state (a crash before it flushed, a
// leader change) numbers a delivery again; such repeats are accepted only as
// allowed.
func checkDeliveries(c *Check, v *view) {
	type key struct{ seq, delivered uint64 }
	perDelivery := map[key][]uint64{}
	beyond := map[uint64][]uint64{} // per message, the delivery numbers beyond the budget
	messages := map[uint64]bool{}
	var calls int
	var highest uint64
	for _, r := range v.in.Requests {
		seq, d, ok := topology.ParseCallRef(r.CallRef)
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
	for _, seq := range sortedKeys(beyond) {
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
}

// checkOneStore makes one-store: one store answers. Every receipt of the
// service's outcome names the store that decided the call; a store id other
// than the audited store's means that a second task service instance, with a
// store of its own, answered calls: its creates are not in the audited records,
// so one intent may have been created twice. Receipts stored before receipts
// named their store carry no id and are counted as such.
func checkOneStore(c *Check, in *Input) {
	if in.Service.StoreID == "" {
		c.violate("the task service did not name its store")
	}
	others := map[string][]string{}
	var named, unnamed int
	for _, seq := range sortedKeys(in.Receipts) {
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
}
