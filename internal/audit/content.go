package audit

import (
	"fmt"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
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
// digest are the message's is check 7's; this check compares the content.

// checkContent makes content-as-approved: every task the service created holds the content of its approved
// request, and the service refused no call for not matching its request.
func checkContent(c *Check, v *view) {
	in := v.in
	createByTask := map[string]provider.CreateRecord{}
	for _, cr := range in.Creates {
		if _, ok := createByTask[cr.TaskID]; !ok {
			createByTask[cr.TaskID] = cr
		}
	}
	reqBySeq := make(map[uint64]provider.RequestRecord, len(in.Requests))
	for _, r := range in.Requests {
		reqBySeq[r.Seq] = r
	}
	// The messages by intent id and request digest, for creates whose call
	// names no message.
	type content struct {
		key    key
		digest string
	}
	byContent := map[content]uint64{}
	for _, seq := range sortedSeqs(v.msgs) {
		m := v.msgs[seq]
		k := content{keyOf(m.id.Scope, m.id.IntentID), m.digest}
		if _, ok := byContent[k]; !ok && m.hasData && m.digest != "" {
			byContent[k] = seq
		}
	}
	approved := map[uint64]*document.Request{}
	approvedRequest := func(seq uint64) (*document.Request, error) {
		if q, ok := approved[seq]; ok {
			return q, nil
		}
		parts, err := document.SplitEnvelope(in.Approvals[seq].Data)
		if err != nil {
			return nil, err
		}
		q, err := document.DecodeRequest("$.request", parts.Request)
		if err != nil {
			return nil, err
		}
		approved[seq] = q
		return q, nil
	}

	var compared, differing, external, outside, unread, retired int
	for _, t := range in.Tasks {
		cr, ok := createByTask[t.TaskID]
		if !ok && v.retirable(parseTime(t.CreatedAt)) {
			// Its create record was retired by the records retention.
			retired++
			continue
		}
		if !ok {
			c.violate("task %s (intent %q) has no create record: the request that created it, and so its approved content, is unknown", t.TaskID, t.IntentID)
			continue
		}
		r, ok := reqBySeq[cr.RequestSeq]
		if !ok && v.retirable(parseTime(cr.CreatedAt)) {
			retired++
			continue
		}
		if !ok {
			c.violate("task %s (intent %q): its create names request %d, which is not recorded: its approved content is unknown", t.TaskID, t.IntentID, cr.RequestSeq)
			continue
		}
		seq, _, named := callSeq(r.CallRef)
		if named {
			switch v.place(seq) {
			case beforeWindow, afterWindow:
				outside++
				continue
			case missing:
				// Check 7 reports a call naming a message the stream does
				// not hold.
				unread++
				continue
			}
		} else {
			if seq, ok = byContent[content{keyOf(cr.Scope, cr.IntentID), cr.RequestDigest}]; !ok {
				// A call from outside the executors (check 7 counts them
				// against what is allowed) under a request no stored
				// message carries: there is nothing to compare with.
				external++
				continue
			}
		}
		if !v.msgs[seq].hasData {
			unread++
			continue
		}
		q, err := approvedRequest(seq)
		if err != nil {
			// Check 9 reports a message the gate refuses that reached
			// the service.
			unread++
			continue
		}
		compared++
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
		if diffs > 0 {
			differing++
		}
	}

	var refused int
	for _, r := range in.Requests {
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
	c.fig("tasks", len(in.Tasks))
	c.fig("compared with their approved request", compared)
	c.fig("differing from their approved request", differing)
	c.fig("created by calls from outside the executors (nothing to compare with)", external)
	c.fig("for messages outside the window (excluded)", outside)
	c.fig("for messages the stream does not hold or whose request cannot be read (see checks 7 and 9)", unread)
	c.fig("requests the service refused", refused)
	c.fig("tasks whose create or request record was retired (not compared)", retired)
	if retired > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d tasks were created by calls whose records the records retention (%s) retired: their content could not be compared with their approved request",
			retired, in.Lifetime.RecordsRetention))
	}
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
