package audit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// This file checks the creates against the keys: one create per key and
// receipts that name its task (one-create-per-key), and first records no
// later call changed (first-records-unchanged).

// checkOneCreate makes one-create-per-key: per key (scope, intent id) at most
// one create, and every created or replayed receipt of that key names its one
// task, never another key's; a receipt that says its task was deleted names a
// key whose task was deleted, and no key is created again after its task was
// deleted. A receipt whose key record is gone is checked against the key's
// deadline (see keys.go): after it the key was compacted on time and its first
// result can no longer be compared (counted); before it the key was forgotten
// too early (a violation).
func checkOneCreate(c *Check, v *view) {
	in := v.in
	withCreate, doubled := checkDoubledCreates(c, in.Creates)
	recs := newKeyRecords(in)
	tasks := map[key]string{}
	var n receiptTally
	for _, seq := range sortedKeys(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if r.Outcome != document.OutcomeCreated && r.Outcome != document.OutcomeReplayed || r.IntentID == nil || r.TaskID == nil {
				continue
			}
			n.checked++
			k, task := receiptKey(r), *r.TaskID
			if o, ok := recs.owner[task]; ok && o != k {
				n.otherKey++
				c.violate("receipt %s (%s) of message %d is for %s, but names task %s, which the service created for %s", r.ReceiptID, r.Outcome, seq, k, task, o)
				continue
			}
			if prev, ok := tasks[k]; ok && prev != task {
				c.violate("%s: receipts name tasks %s and %s", k, prev, task)
			}
			tasks[k] = task
			f, kept := recs.first[k]
			switch {
			case kept && f.TaskID != task:
				c.violate("%s: receipt of message %d names %s, the service's first result %s", k, seq, task, f.TaskID)
			case !kept:
				v.checkKeyGone(c, r, seq, recs, &n)
			}
			recs.checkDeleted(c, r, seq, &n)
		}
	}
	c.fig("keys with a create", withCreate)
	c.fig("doubled keys", doubled)
	c.fig("created and replayed receipts checked", n.checked)
	c.fig("receipts naming another key's task", n.otherKey)
	c.fig("replayed receipts of a deleted task", n.deletedReplays)
	c.fig("receipts whose key was compacted after its deadline (outside the audit window)", n.compacted)
	c.fig("receipts whose key is gone, with neither their approval nor their call on record (not checked)", n.unchecked)
	if n.compacted > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d created or replayed receipts name keys compacted after their deadline (approval not_after + the approvals stream's max age + the service's clock allowance %s and margin %s): their first result could not be compared",
			n.compacted, in.Lifetime.ClockAllowance, in.Lifetime.Margin))
	}
	if n.unchecked > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d created or replayed receipts name keys the service no longer keeps, for messages the stream no longer holds and calls whose records were retired: their keys' deadlines could not be checked", n.unchecked))
	}
}

// receiptTally counts the receipts checkOneCreate checked.
type receiptTally struct {
	checked, otherKey, compacted, unchecked, deletedReplays int
}

// checkDoubledCreates reports every key created more than once, and
// returns how many keys have a create and how many more than one.
func checkDoubledCreates(c *Check, creates []provider.CreateRecord) (withCreate, doubled int) {
	perKey := map[key]int{}
	for _, cr := range creates {
		perKey[keyOf(cr.Scope, cr.IntentID)]++
	}
	var twice []key
	for k, n := range perKey {
		if n > 1 {
			twice = append(twice, k)
		}
	}
	slices.SortFunc(twice, compareKeys)
	for _, k := range twice {
		c.violate("%s was created %d times", k, perKey[k])
	}
	return len(perKey), len(twice)
}

// keyRecords is what the service's records say of each key: its first
// result, its deleted task, the key each task id was created for, and the
// calls by call reference.
type keyRecords struct {
	first   map[key]provider.FirstResult
	deleted map[key]provider.DeleteRecord
	owner   map[string]key
	calls   map[string]provider.RequestRecord
}

func newKeyRecords(in *Input) keyRecords {
	recs := keyRecords{first: map[key]provider.FirstResult{}, deleted: map[key]provider.DeleteRecord{},
		owner: map[string]key{}, calls: map[string]provider.RequestRecord{}}
	own := func(task string, k key) {
		if _, ok := recs.owner[task]; !ok && task != "" {
			recs.owner[task] = k
		}
	}
	for _, f := range in.Intents {
		recs.first[keyOf(f.Scope, f.IntentID)] = f
	}
	for _, cr := range in.Creates {
		own(cr.TaskID, keyOf(cr.Scope, cr.IntentID))
	}
	for _, t := range in.Tasks {
		own(t.TaskID, keyOf(t.Scope, t.IntentID))
	}
	for _, f := range in.Intents {
		own(f.TaskID, keyOf(f.Scope, f.IntentID))
	}
	for _, d := range in.Deletes {
		k := keyOf(d.Scope, d.IntentID)
		own(d.TaskID, k)
		recs.deleted[k] = d
	}
	for _, r := range in.Requests {
		recs.calls[r.CallRef] = r
	}
	return recs
}

// checkKeyGone judges a created or replayed receipt r of message seq whose
// key the service no longer keeps, by the key's deadline: from the
// approval the stream holds, else from the not_after its call carried.
func (v *view) checkKeyGone(c *Check, r *document.Receipt, seq uint64, recs keyRecords, n *receiptTally) {
	deadline, ok := v.keyDeadline(seq)
	known := v.place(seq) == inWindow
	if !known {
		if req, found := recs.calls[callRef(r)]; found {
			deadline, ok = v.requestDeadline(req)
			known = true
		}
	}
	switch {
	case v.compactable(deadline, ok):
		n.compacted++
	case !known:
		n.unchecked++
	case !ok:
		c.violate("receipt %s (%s) of message %d names %s, whose key the service no longer keeps, although its approval never expires (the key must be kept forever)",
			r.ReceiptID, r.Outcome, seq, receiptKey(r))
	default:
		c.violate("receipt %s (%s) of message %d names %s, whose key the service no longer keeps, although an approval could resend it until %s: the key was forgotten too early",
			r.ReceiptID, r.Outcome, seq, receiptKey(r), deadline.UTC().Format(time.RFC3339))
	}
}

// checkDeleted checks a created or replayed receipt r of message seq
// against its key's deleted task: a receipt that says its task was
// deleted names a key whose task was, and a key is not created again
// after its task was deleted.
func (recs keyRecords) checkDeleted(c *Check, r *document.Receipt, seq uint64, n *receiptTally) {
	k, task := receiptKey(r), *r.TaskID
	d, wasDeleted := recs.deleted[k]
	if r.TaskDeleted {
		n.deletedReplays++
		if !wasDeleted {
			c.violate("receipt %s (%s) of message %d says the task %s of %s was deleted, but the service deleted no task of that key", r.ReceiptID, r.Outcome, seq, task, k)
		}
	}
	if wasDeleted && r.Outcome == document.OutcomeCreated && task != d.TaskID {
		c.violate("receipt %s of message %d: %s was created again (task %s) after its task %s was deleted at %s", r.ReceiptID, seq, k, task, d.TaskID, d.DeletedAt)
	}
}

func compareKeys(a, b key) int {
	return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.intent, b.intent))
}

// checkFirstRecords makes first-records-unchanged: no conflict changed a first
// record. Records are matched by key (scope, intent id). A first record whose
// creating request was retired by the records retention, and a replay or
// conflict whose key was compacted after its deadline, are counted, not
// violations.
func checkFirstRecords(c *Check, v *view) {
	in := v.in
	bySeq := map[uint64]*provider.RequestRecord{}
	for i := range in.Requests {
		bySeq[in.Requests[i].Seq] = &in.Requests[i]
	}
	create := map[key]provider.CreateRecord{}
	for _, cr := range in.Creates {
		if _, ok := create[keyOf(cr.Scope, cr.IntentID)]; !ok {
			create[keyOf(cr.Scope, cr.IntentID)] = cr
		}
	}
	first := map[key]provider.FirstResult{}
	var retired, compacted int
	for _, f := range in.Intents {
		k := keyOf(f.Scope, f.IntentID)
		first[k] = f
		req, ok := bySeq[f.RequestSeq]
		switch {
		case !ok && v.retirable(parseTime(f.CreatedAt)):
			retired++
		case !ok:
			c.violate("%s: its first record points at request %d, which is not recorded", k, f.RequestSeq)
		case req.Outcome != document.OutcomeCreated || req.RequestDigest != f.RequestDigest || req.TaskID != f.TaskID:
			c.violate("%s: first record (%s, %s) differs from the request that created it (%s, %s, %s)",
				k, f.RequestDigest, f.TaskID, req.Outcome, req.RequestDigest, req.TaskID)
		}
		if cr, ok := create[k]; ok && (cr.RequestDigest != f.RequestDigest || cr.TaskID != f.TaskID) {
			c.violate("%s: first record (%s, %s) differs from its create (%s, %s)", k, f.RequestDigest, f.TaskID, cr.RequestDigest, cr.TaskID)
		}
	}
	var conflicts, replays int
	for _, r := range in.Requests {
		if r.Outcome != document.OutcomeConflict && r.Outcome != document.OutcomeReplayed {
			continue
		}
		k := keyOf(r.Scope, r.IntentID)
		f, ok := first[k]
		if !ok || r.Seq < f.RequestSeq {
			// The key this call met is no longer kept (or was kept
			// before a compaction and created anew since).
			if deadline, ok := v.requestDeadline(r); v.compactable(deadline, ok) {
				compacted++
				continue
			}
			why := "its approval never expires"
			if r.NotAfter != "" {
				why = "the key deadline its call carried (" + r.NotAfter + ") has not passed"
			}
			c.violate("request %d: a %s for %s, whose key the service no longer keeps although %s", r.Seq, r.Outcome, k, why)
			continue
		}
		switch r.Outcome {
		case document.OutcomeConflict:
			conflicts++
			if r.RequestDigest == f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a conflict for %s that does not match its first record", r.Seq, k)
			}
		case document.OutcomeReplayed:
			replays++
			if r.RequestDigest != f.RequestDigest || r.TaskID != f.TaskID {
				c.violate("request %d: a replay for %s that does not match its first record", r.Seq, k)
			}
		}
		if r.TaskDeleted && !f.TaskDeleted {
			c.violate("request %d: answered with the deleted mark for %s, whose task was not deleted", r.Seq, k)
		}
	}
	c.fig("first records", len(in.Intents))
	c.fig("conflicts", conflicts)
	c.fig("replays", replays)
	c.fig("first records whose creating request was retired (not compared)", retired)
	c.fig("replays and conflicts whose key was compacted after its deadline (outside the audit window)", compacted)
}
