package audit

import (
	"fmt"

	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file checks the task service's counters against each other and
// against its records (counters), and its requests against the receipts
// and the calls whose reply was lost (requests-accounted).

// checkCounters makes counters: the counters agree with each other and with the
// records: every create made a task, which exists or was deleted (creates
// executed = tasks existing + tasks deleted), and a key, which is live or
// compacted (= keys live + keys compacted); every live key names its task
// (existing, or deleted with a delete record); request and create records
// missing are the records retired, and only under a records retention.
func checkCounters(c *Check, in *Input) {
	n := in.Counts.CreatesExecuted
	k := in.Keys
	c.fig("creates executed", int(n))
	c.fig("tasks existing", int(in.Counts.TasksExisting))
	c.fig("tasks deleted", int(k.TasksDeleted))
	c.fig("keys live", int(k.Live))
	c.fig("keys compacted (intent records removed after their deadline, not a violation)", int(k.Compacted))
	c.fig("create records", len(in.Creates))
	c.fig("task records", len(in.Tasks))
	c.fig("delete records", len(in.Deletes))
	c.fig("intent records", len(in.Intents))
	c.fig("records retired by the records retention", int(k.RecordsRetired))
	if in.Counts.TasksExisting+k.TasksDeleted != n {
		c.violate("creates executed %d ≠ tasks existing %d + tasks deleted %d", n, in.Counts.TasksExisting, k.TasksDeleted)
	}
	if k.Live+k.Compacted != n {
		c.violate("creates executed %d ≠ keys live %d + keys compacted %d: a create that made no key of its own", n, k.Live, k.Compacted)
	}
	if int64(len(in.Tasks)) != in.Counts.TasksExisting || int64(len(in.Deletes)) != k.TasksDeleted || int64(len(in.Intents)) != k.Live {
		c.violate("records differ from the counters: %d task records for %d tasks existing, %d delete records for %d tasks deleted, %d intent records for %d keys live",
			len(in.Tasks), in.Counts.TasksExisting, len(in.Deletes), k.TasksDeleted, len(in.Intents), k.Live)
	}
	checkRetired(c, in)
	checkLiveKeys(c, in)
	checkScopes(c, in)
}

// checkRequests makes requests-accounted: requests received equals the calls
// that reached the service: receipts from the service plus calls whose reply
// was lost, within in-flight work. Calls and receipts of messages outside the
// audited window (aged out before it, or stored while the audit read) and calls
// from outside the executors are counted apart and make up the rest of the
// equation.
func checkRequests(c *Check, v *view) {
	in := v.in
	var n requestTally
	byRef := v.callsByRef(c, &n)
	matched := v.matchReceipts(c, byRef, &n)
	v.lostReplies(byRef, matched, &n)
	c.fig("requests received", int(in.Counts.RequestsReceived))
	c.fig("request records", len(in.Requests))
	c.fig("receipts from the service", n.receipts)
	c.fig("calls whose reply was lost", n.lost)
	c.fig("of which replies dropped by the service", n.dropped)
	c.fig("of which the message finished on another delivery", n.finishedLater)
	c.fig("of which still in flight", n.inFlight)
	c.fig("calls from outside the executors", n.external)
	c.fig("calls for messages before the window (excluded)", n.before)
	c.fig("calls for messages stored while verify read (excluded)", n.after)
	c.fig("receipts whose call record was retired (not matched)", n.retired)
	if in.Lifetime.RecordsRetention == 0 && in.Counts.RequestsReceived != int64(len(in.Requests)) {
		c.violate("the counter says %d requests, the records hold %d", in.Counts.RequestsReceived, len(in.Requests))
	}
	if in.Counts.RequestsReceived < int64(len(in.Requests)) {
		c.violate("the counter says %d requests, the records hold more: %d", in.Counts.RequestsReceived, len(in.Requests))
	}
	if n.receipts-n.retired+n.lost+n.external+n.before+n.after != len(in.Requests) {
		c.violate("%d receipts + %d lost + %d external + %d outside the window ≠ %d request records (%d requests received)",
			n.receipts-n.retired, n.lost, n.external, n.before+n.after, len(in.Requests), in.Counts.RequestsReceived)
	}
	if missing := in.Counts.RequestsReceived - int64(len(in.Requests)); missing > 0 && in.Lifetime.RecordsRetention > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d request records were retired by the records retention (%s): %d receipts of calls older than it could not be matched to their calls",
			missing, in.Lifetime.RecordsRetention, n.retired))
	}
	if allowed := int(in.Consumer.Pending) + in.Consumer.AckPending; n.inFlight > allowed {
		c.violate("%d calls have no receipt and their messages are unfinished, more than the %d messages in flight", n.inFlight, allowed)
	}
}

// requestTally counts what checkRequests matched, and what it could not.
type requestTally struct {
	external, before, after                int
	receipts, retired                      int
	lost, dropped, finishedLater, inFlight int
}

// callsByRef returns the calls from the executors for messages in the
// window by call reference, reporting a call recorded twice, and counts
// the others.
func (v *view) callsByRef(c *Check, n *requestTally) map[string]*provider.RequestRecord {
	in := v.in
	byRef := map[string]*provider.RequestRecord{}
	for i := range in.Requests {
		r := &in.Requests[i]
		seq, _, ok := topology.ParseCallRef(r.CallRef)
		if !ok {
			n.external++
			continue
		}
		switch v.place(seq) {
		case beforeWindow:
			n.before++
			continue
		case afterWindow:
			n.after++
			continue
		}
		if _, dup := byRef[r.CallRef]; dup {
			c.violate("call %s reached the service twice", r.CallRef)
		}
		byRef[r.CallRef] = r
	}
	return byRef
}

// matchReceipts matches every receipt of the service's answer for a
// message in the window with its call, reporting a receipt without one or
// one that says otherwise; it returns the calls matched.
func (v *view) matchReceipts(c *Check, byRef map[string]*provider.RequestRecord, n *requestTally) map[string]bool {
	in := v.in
	matched := map[string]bool{}
	for _, seq := range sortedKeys(in.Receipts) {
		if p := v.place(seq); p == beforeWindow || p == afterWindow {
			continue
		}
		for _, r := range in.Receipts[seq] {
			if !serviceOutcome(r.Outcome) {
				continue
			}
			n.receipts++
			ref := callRef(r)
			req, ok := byRef[ref]
			switch {
			case !ok && v.retirable(v.messageStored(seq)):
				// The call's record may have been retired by the
				// records retention: it cannot be matched.
				n.retired++
				continue
			case !ok:
				c.violate("receipt %s (%s) names a call the service never recorded", r.ReceiptID, r.Outcome)
			case req.Outcome != r.Outcome || req.TaskID != deref(r.TaskID):
				c.violate("receipt %s says %s %s; the service recorded %s %s", r.ReceiptID, r.Outcome, deref(r.TaskID), req.Outcome, req.TaskID)
			}
			matched[ref] = true
		}
	}
	return matched
}

// lostReplies counts the calls no receipt matched: their reply was lost,
// dropped by the service, or their message finished on another delivery,
// or is still in flight.
func (v *view) lostReplies(byRef map[string]*provider.RequestRecord, matched map[string]bool, n *requestTally) {
	for ref, req := range byRef {
		if matched[ref] {
			continue
		}
		n.lost++
		seq, _, _ := topology.ParseCallRef(ref)
		finished := len(v.in.Receipts[seq]) > 0
		if _, dead := v.in.DeadLetters[seq]; dead {
			finished = true
		}
		switch {
		case req.ReplyDropped:
			n.dropped++
		case finished:
			n.finishedLater++
		default:
			n.inFlight++
		}
	}
}

// checkRetired checks the records missing against the records retired:
// request and create records missing are the records retired, and only
// under a records retention.
func checkRetired(c *Check, in *Input) {
	n, k := in.Counts.CreatesExecuted, in.Keys
	retiredRequests := in.Counts.RequestsReceived - int64(len(in.Requests))
	retiredCreates := n - int64(len(in.Creates))
	switch {
	case retiredRequests < 0 || retiredCreates < 0:
		c.violate("more records than the counters count: %d request records for %d requests received, %d create records for %d creates executed",
			len(in.Requests), in.Counts.RequestsReceived, len(in.Creates), n)
	case retiredRequests+retiredCreates != k.RecordsRetired:
		c.violate("%d request records and %d create records are missing, but the service retired %d records", retiredRequests, retiredCreates, k.RecordsRetired)
	case k.RecordsRetired > 0 && in.Lifetime.RecordsRetention == 0:
		c.violate("the service retired %d records although it keeps records forever", k.RecordsRetired)
	}
	if k.Compacted > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d keys were compacted after their deadline: intent records are fewer than creates by that many, which is not a violation", k.Compacted))
	}
	if k.RecordsRetired > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d request records and %d create records were retired by the records retention (%s): the calls and creates they recorded cannot be checked",
			retiredRequests, retiredCreates, in.Lifetime.RecordsRetention))
	}
}

// checkLiveKeys checks one task per live key: the task its intent record
// names exists, or was deleted; a task of a live key is that key's task.
func checkLiveKeys(c *Check, in *Input) {
	taskByID := map[string]provider.TaskRecord{}
	for _, t := range in.Tasks {
		taskByID[t.TaskID] = t
	}
	deletedByID := map[string]provider.DeleteRecord{}
	for _, d := range in.Deletes {
		deletedByID[d.TaskID] = d
	}
	first := map[key]provider.FirstResult{}
	for _, f := range in.Intents {
		fk := keyOf(f.Scope, f.IntentID)
		first[fk] = f
		t, exists := taskByID[f.TaskID]
		d, gone := deletedByID[f.TaskID]
		switch {
		case exists && keyOf(t.Scope, t.IntentID) != fk:
			c.violate("%s names task %s, which is %s's", fk, f.TaskID, keyOf(t.Scope, t.IntentID))
		case gone && keyOf(d.Scope, d.IntentID) != fk:
			c.violate("%s names task %s, deleted as %s's", fk, f.TaskID, keyOf(d.Scope, d.IntentID))
		case !exists && !gone:
			c.violate("%s names task %s, which neither exists nor was deleted", fk, f.TaskID)
		case exists && f.TaskDeleted:
			c.violate("%s says its task %s was deleted, but the task exists", fk, f.TaskID)
		case gone && !f.TaskDeleted:
			c.violate("%s does not say its task %s was deleted, but a delete record says so", fk, f.TaskID)
		}
	}
	for _, t := range in.Tasks {
		if f, ok := first[keyOf(t.Scope, t.IntentID)]; ok && f.TaskID != t.TaskID {
			c.violate("task %s of %s exists beside the key's own task %s", t.TaskID, keyOf(t.Scope, t.IntentID), f.TaskID)
		}
	}
}

// checkScopes checks that the scopes' counters add up to the totals.
func checkScopes(c *Check, in *Input) {
	if len(in.Scopes) == 0 {
		return
	}
	var sum provider.Counts
	for _, s := range in.Scopes {
		sum.RequestsReceived += s.RequestsReceived
		sum.CreatesExecuted += s.CreatesExecuted
		sum.TasksExisting += s.TasksExisting
	}
	if sum != in.Counts {
		c.violate("the scopes' counters add up to %d, %d, %d, the totals say %d, %d, %d", sum.RequestsReceived, sum.CreatesExecuted, sum.TasksExisting,
			in.Counts.RequestsReceived, in.Counts.CreatesExecuted, in.Counts.TasksExisting)
	}
	c.fig("scopes", len(in.Scopes))
}
