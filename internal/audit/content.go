package audit

import (
	"fmt"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file compares what the task service created with what was approved.
// A create is keyed by its intent id and compared by the request digest, so
// the digest alone cannot show that the task created is the one a person
// approved: a caller could send an approved digest with a task of its own.
// The service refuses such a call today; a store written before it did, or
// a service that does not check, would hold the caller's task. So the audit
// reads each task's content from the service's task records and compares
// it, field by field, with the task in the approved request that created
// it: the request inside the envelope of the APPROVALS message that the
// creating call names (its call reference), or else the stored message with
// the create's intent id and request digest. That the call's intent id and
// digest are the message's is calls-name-messages'; this check compares the
// content.

// checkContent makes content-as-approved: every task the service created
// holds the content of its approved request, and the service refused no
// call for not matching its request.
func checkContent(c *Check, v *view) {
	in := v.in
	ix := newContentIndex(v)
	var n contentTally
	for _, t := range in.Tasks {
		seq, ok := ix.approvedMessage(c, t, &n)
		if !ok {
			continue
		}
		q, err := ix.approvedRequest(seq)
		if err != nil {
			// gate-passes reports a message the gate refuses that
			// reached the service.
			n.unread++
			continue
		}
		n.compared++
		if compareTask(c, t, seq, q) > 0 {
			n.differing++
		}
	}
	refused := checkRefused(c, in.Requests)
	c.fig("tasks", len(in.Tasks))
	c.fig("compared with their approved request", n.compared)
	c.fig("differing from their approved request", n.differing)
	c.fig("created by calls from outside the executors (nothing to compare with)", n.external)
	c.fig("for messages outside the window (excluded)", n.outside)
	c.fig("for messages the stream does not hold or whose request cannot be read (see checks 7 and 9)", n.unread)
	c.fig("requests the service refused", refused)
	c.fig("tasks whose create or request record was retired (not compared)", n.retired)
	if n.retired > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d tasks were created by calls whose records the records retention (%s) retired: their content could not be compared with their approved request",
			n.retired, in.Lifetime.RecordsRetention))
	}
}

// contentTally counts the tasks checkContent compared and those it could
// not.
type contentTally struct {
	compared, differing, external, outside, unread, retired int
}

// contentKey names the messages by key and request digest, for creates
// whose call names no message.
type contentKey struct {
	key    key
	digest string
}

// contentIndex is what checkContent looks a task's approved request up
// by: its create, the create's request, and the stored messages.
type contentIndex struct {
	v            *view
	createByTask map[string]provider.CreateRecord
	reqBySeq     map[uint64]provider.RequestRecord
	byContent    map[contentKey]uint64
	approved     map[uint64]*document.Request
}

func newContentIndex(v *view) *contentIndex {
	in := v.in
	ix := &contentIndex{v: v, createByTask: map[string]provider.CreateRecord{},
		reqBySeq:  make(map[uint64]provider.RequestRecord, len(in.Requests)),
		byContent: map[contentKey]uint64{}, approved: map[uint64]*document.Request{}}
	for _, cr := range in.Creates {
		if _, ok := ix.createByTask[cr.TaskID]; !ok {
			ix.createByTask[cr.TaskID] = cr
		}
	}
	for _, r := range in.Requests {
		ix.reqBySeq[r.Seq] = r
	}
	for _, seq := range sortedKeys(v.msgs) {
		m := v.msgs[seq]
		k := contentKey{keyOf(m.id.Scope, m.id.IntentID), m.digest}
		if _, ok := ix.byContent[k]; !ok && m.hasData && m.digest != "" {
			ix.byContent[k] = seq
		}
	}
	return ix
}

// approvedMessage returns the stored message whose approved request
// created task t, and whether there is one to compare t with; when there
// is none, it says why in c or counts why in n.
func (ix *contentIndex) approvedMessage(c *Check, t provider.TaskRecord, n *contentTally) (uint64, bool) {
	v := ix.v
	cr, ok := ix.createByTask[t.TaskID]
	if !ok && v.retirable(parseTime(t.CreatedAt)) {
		// Its create record was retired by the records retention.
		n.retired++
		return 0, false
	}
	if !ok {
		c.violate("task %s (intent %q) has no create record: the request that created it, and so its approved content, is unknown", t.TaskID, t.IntentID)
		return 0, false
	}
	r, ok := ix.reqBySeq[cr.RequestSeq]
	if !ok && v.retirable(parseTime(cr.CreatedAt)) {
		n.retired++
		return 0, false
	}
	if !ok {
		c.violate("task %s (intent %q): its create names request %d, which is not recorded: its approved content is unknown", t.TaskID, t.IntentID, cr.RequestSeq)
		return 0, false
	}
	seq, _, named := topology.ParseCallRef(r.CallRef)
	if named {
		switch v.place(seq) {
		case beforeWindow, afterWindow:
			n.outside++
			return 0, false
		case missing:
			// calls-name-messages reports a call naming a message the
			// stream does not hold.
			n.unread++
			return 0, false
		}
	} else if seq, ok = ix.byContent[contentKey{keyOf(cr.Scope, cr.IntentID), cr.RequestDigest}]; !ok {
		// A call from outside the executors (calls-name-messages counts
		// them against what is allowed) under a request no stored
		// message carries: there is nothing to compare with.
		n.external++
		return 0, false
	}
	if !v.msgs[seq].hasData {
		n.unread++
		return 0, false
	}
	return seq, true
}

// approvedRequest is the request inside message seq's envelope.
func (ix *contentIndex) approvedRequest(seq uint64) (*document.Request, error) {
	if q, ok := ix.approved[seq]; ok {
		return q, nil
	}
	parts, err := document.SplitEnvelope(ix.v.in.Approvals[seq].Data)
	if err != nil {
		return nil, err
	}
	q, err := document.DecodeRequest("$.request", parts.Request)
	if err != nil {
		return nil, err
	}
	ix.approved[seq] = q
	return q, nil
}

// compareTask reports every field in which task t differs from the task
// of its approved request q (message seq), and returns how many.
func compareTask(c *Check, t provider.TaskRecord, seq uint64, q *document.Request) int {
	diffs := 0
	differ := func(field, got, want string) {
		diffs++
		c.violate("task %s (intent %q) differs from its approved request (message %d) at %s: the service holds %s, the request says %s",
			t.TaskID, t.IntentID, seq, field, got, want)
	}
	if t.Task.Title != q.Task.Title {
		differ("task.title", quote(t.Task.Title), quote(q.Task.Title))
	}
	if !sameOptional(t.Task.AssigneePersonRef, q.Task.AssigneePersonRef) {
		differ("task.assignee_person_ref", optional(t.Task.AssigneePersonRef), optional(q.Task.AssigneePersonRef))
	}
	if !sameOptional(t.Task.DueAt, q.Task.DueAt) {
		differ("task.due_at", optional(t.Task.DueAt), optional(q.Task.DueAt))
	}
	return diffs
}

// checkRefused reports every call the service refused for not matching
// its request, and returns how many.
func checkRefused(c *Check, requests []provider.RequestRecord) int {
	var refused int
	for _, r := range requests {
		if r.Outcome != provider.OutcomeRefused {
			continue
		}
		refused++
		why := "no reason recorded"
		if f := r.Refusal; f != nil {
			why = fmt.Sprintf("%s failed at %s: %s", f.Check, f.Field, f.Reason)
		}
		c.violate("request %d (intent %q, call reference %q) was refused by the service, %s: a caller with create rights asked for a task its request does not hold",
			r.Seq, r.IntentID, r.CallRef, why)
	}
	return refused
}

// maxShown bounds the characters of a value quoted in a violation.
const maxShown = 80

func quote(s string) string {
	if utf8.RuneCountInString(s) > maxShown {
		r := []rune(s)
		return fmt.Sprintf("%q…", string(r[:maxShown]))
	}
	return fmt.Sprintf("%q", s)
}

func optional(p *string) string {
	if p == nil {
		return "null"
	}
	return quote(*p)
}

func sameOptional(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
