package servicetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sendtwice/sendtwice/taskservice"
)

func (r *Rows) retry(ctx context.Context) Row {
	row := Head(RowRetry)
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	r2, n, err := r.callRetry(ctx, req)
	after := ""
	if n > 0 {
		after = fmt.Sprintf(" after %s", plural(n, "retry"))
	}
	tasks, counted := r.count(ctx, req.IntentID)
	switch {
	case err != nil:
		row.Status, row.Answer = Unsafe, "error"
		row.Seen = fmt.Sprintf("created %s, then the retry %s%s", r1.TaskID, failure(err), counted)
		row.Consequence, row.Fix = "a resend of a carried-out approval fails and is dead-lettered", fixAnswer
		if taskservice.IsPermanent(err) {
			row.Fix = fixLookUp
		}
	case r2.Outcome == taskservice.Created || tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("created %s, then %s %s%s%s", r1.TaskID, r2.Outcome, r2.TaskID, after, counted)
		row.Consequence, row.Fix = consSecond, fixLookUp
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Seen = fmt.Sprintf("created %s, then idempotency_conflict %s for the same body%s%s", r1.TaskID, r2.TaskID, after, counted)
		row.Consequence, row.Fix = consMisreport, fixLookUp
	case r2.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "another task"
		row.Seen = fmt.Sprintf("created %s, then replayed naming %s%s%s", r1.TaskID, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a resend's receipt names another task than the first", fixLookUp
	default:
		row.Status, row.Answer = Safe, "first result"
		row.Seen = fmt.Sprintf("created %s, then replayed %s%s%s", r1.TaskID, r2.TaskID, after, counted)
	}
	return row
}

func (r *Rows) conflict(ctx context.Context) Row {
	row := Head(RowConflict)
	req, r1, ok := r.open(ctx, &row)
	other := r.request(RowConflict, 1)
	if !ok {
		return row
	}
	r2, _, err := r.callRetry(ctx, other)
	if err != nil {
		return notMeasured(row, fmt.Sprintf("created %s, then the other body %s", r1.TaskID, failure(err)))
	}
	r3, _, err3 := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	third := ""
	if err3 != nil {
		third = "; the first body again " + failure(err3)
	} else {
		third = fmt.Sprintf("; the first body again: %s %s", r3.Outcome, r3.TaskID)
	}
	row.Seen = fmt.Sprintf("created %s; the other body: %s %s%s%s", r1.TaskID, r2.Outcome, r2.TaskID, third, counted)
	switch {
	case r2.Outcome == taskservice.Created || tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Consequence, row.Fix = "a changed request under a known intent creates a second task", fixKeepFirst
	case r2.Outcome == taskservice.Replayed:
		row.Status, row.Answer = Unsafe, "replayed"
		row.Consequence, row.Fix = "a changed request under a known intent is reported as done, and the change is lost unseen", fixKeepFirst
	case r2.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "conflict, another task"
		row.Consequence, row.Fix = "a conflict names another task than the one the intent holds", fixKeepFirst
	case err3 != nil:
		row.Status, row.Answer = Unknown, "conflict"
	case r3.Outcome != taskservice.Replayed || r3.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "conflict, first replaced"
		row.Consequence, row.Fix = "a changed request replaces the first under its key, so a resend of the first is no longer recognised", fixKeepFirst
	default:
		row.Status, row.Answer = Safe, "conflict, first kept"
	}
	return row
}

// concurrentAnswer is one of the concurrent row's calls: its result or
// error, and whether it was retried after a transient error.
type concurrentAnswer struct {
	res     taskservice.Result
	err     error
	retried bool
}

// callAtOnce sends req n times at once, then retries each call that failed
// transiently, as its delivery would be.
func (r *Rows) callAtOnce(ctx context.Context, req taskservice.Request, n int) []concurrentAnswer {
	answers := make([]concurrentAnswer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			res, err := r.call(ctx, req, r.o.CallTimeout)
			answers[i] = concurrentAnswer{res: res, err: err}
		})
	}
	close(start)
	wg.Wait()
	for i := range answers {
		if a := &answers[i]; a.err != nil && !taskservice.IsPermanent(a.err) && ctx.Err() == nil {
			a.res, _, a.err = r.callRetry(ctx, req)
			a.retried = true
		}
	}
	return answers
}

func (r *Rows) concurrent(ctx context.Context) Row {
	row := Head(RowConcurrent)
	row.Method = fmt.Sprintf("%d goroutines at once", r.o.Concurrency)
	req := r.request(RowConcurrent, 0)
	row.IntentID = req.IntentID
	n := r.o.Concurrency
	answers := r.callAtOnce(ctx, req, n)
	var created, replayed, conflict, failed, retried int
	ids := map[string]bool{}
	var lastErr error
	for _, a := range answers {
		if a.retried {
			retried++
		}
		if a.err != nil {
			failed++
			lastErr = a.err
			continue
		}
		ids[a.res.TaskID] = true
		switch a.res.Outcome {
		case taskservice.Created:
			created++
		case taskservice.Replayed:
			replayed++
		case taskservice.Conflict:
			conflict++
		}
	}
	tasks, counted := r.count(ctx, req.IntentID)
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls at once: %d created, %d replayed", n, created, replayed)
	if conflict > 0 {
		fmt.Fprintf(&b, ", %d idempotency_conflict", conflict)
	}
	if failed > 0 {
		fmt.Fprintf(&b, ", %d failed (%v)", failed, lastErr)
	}
	if retried > 0 {
		fmt.Fprintf(&b, " (%d retried after a transient error)", retried)
	}
	if len(ids) == 1 {
		for id := range ids {
			fmt.Fprintf(&b, ", one task id %s", id)
		}
	} else if len(ids) > 1 {
		fmt.Fprintf(&b, ", %d task ids", len(ids))
	}
	b.WriteString(counted)
	row.Seen = b.String()
	switch {
	case created > 1 || tasks > 1 || len(ids) > 1:
		row.Status, row.Answer = Unsafe, plural(max(created, tasks), "create")
		row.Consequence = "concurrent deliveries of one approval create more than one task"
		row.Fix = fixAtomic
	case conflict > 0:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Consequence, row.Fix = "concurrent deliveries of one approval are reported as conflicts", fixAnswer
	case failed > 0:
		row.Status, row.Answer = Unsafe, "errors"
		row.Consequence, row.Fix = "concurrent deliveries of one approval fail even when retried and end dead-lettered", fixAnswer
	case created == 0:
		row.Status, row.Answer = Unknown, "no create"
		row.Seen += " (no call created the task)"
	default:
		row.Status, row.Answer = Safe, "1 create"
	}
	return row
}

func (r *Rows) lostReply(ctx context.Context) Row {
	row := Head(RowLostReply)
	if r.t.LoseReplyHow != "" {
		row.Method = r.t.LoseReplyHow
	}
	if r.t.LoseReply == nil {
		return notMeasured(row, "the target has no way to lose a reply")
	}
	req := r.request(RowLostReply, 0)
	row.IntentID = req.IntentID
	disarm, err := r.t.LoseReply(ctx)
	if err != nil {
		return notMeasured(row, "a lost reply could not be arranged: "+err.Error())
	}
	res, lostErr := r.call(ctx, req, r.o.LostReplyWait)
	if disarm != nil {
		dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		derr := disarm(dctx)
		cancel()
		if derr != nil {
			return notMeasured(row, "the lost reply could not be disarmed: "+derr.Error())
		}
	}
	if lostErr == nil {
		return notMeasured(row, fmt.Sprintf("the reply was not lost: the call answered %s %s", res.Outcome, res.TaskID))
	}
	first := fmt.Sprintf("the first call got no reply (%v)", lostErr)
	if taskservice.IsPermanent(lostErr) {
		_, counted := r.count(ctx, req.IntentID)
		row.Status, row.Answer = Unsafe, "permanent error"
		row.Seen = first + ", marked permanent" + counted
		row.Consequence, row.Fix = "a delivery whose reply was lost is dead-lettered although its task may exist", fixTransient
		return row
	}
	r2, n, err := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	after := ""
	if n > 0 {
		after = fmt.Sprintf(" after %s", plural(n, "more retry"))
	}
	switch {
	case err != nil:
		row.Status, row.Answer = Unsafe, "error"
		row.Seen = fmt.Sprintf("%s; the retry %s%s", first, failure(err), counted)
		row.Consequence, row.Fix = "a delivery whose reply was lost is dead-lettered although its task exists", fixAnswer
	case tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("%s; the retry: %s %s%s%s", first, r2.Outcome, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a redelivery after a lost reply creates a second task", fixRecordKey
	case r2.Outcome == taskservice.Created && tasks == 1:
		return notMeasured(row, fmt.Sprintf("%s; the retry: created %s%s: the lost call took no effect, so nothing was replayed", first, r2.TaskID, counted))
	case r2.Outcome == taskservice.Created:
		row.Status, row.Answer = Unsafe, "created again"
		row.Seen = fmt.Sprintf("%s; the retry: created %s%s (the target cannot count its tasks, so the worse is assumed: the lost call created one too)", first, r2.TaskID, after)
		row.Consequence, row.Fix = "a redelivery after a lost reply creates a second task", fixRecordKey
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Seen = fmt.Sprintf("%s; the retry: idempotency_conflict %s%s%s", first, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a redelivery after a lost reply is reported as a conflict", fixRecordKey
	default:
		row.Status, row.Answer = Safe, "replayed"
		row.Seen = fmt.Sprintf("%s; the retry: replayed %s%s%s", first, r2.TaskID, after, counted)
	}
	return row
}

func (r *Rows) afterDelete(ctx context.Context) Row {
	row := Head(RowAfterDelete)
	if r.t.Delete == nil {
		if r.t.NeverDeletes {
			row.Method = "stated by the adapter"
			row.Status, row.Answer = Safe, "yes (never deleted)"
			row.Seen = "the service has no way to delete a task: a key lasts as long as its store"
			return row
		}
		return notMeasured(row, "the target has no way to delete a task")
	}
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	if !r.own(req.IntentID) || !strings.HasPrefix(req.IntentID, Prefix) {
		return notMeasured(row, "refused to delete an intent id that is not this run's")
	}
	dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	err := r.t.Delete(dctx, Scope, req.IntentID)
	cancel()
	if err != nil {
		return notMeasured(row, fmt.Sprintf("created %s; deleting it failed: %v", r1.TaskID, err))
	}
	if left, _ := r.count(ctx, req.IntentID); left > 0 {
		return notMeasured(row, fmt.Sprintf("created %s and deleted it, but %s still there", r1.TaskID, plural(left, "task")))
	}
	r2, _, err := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	switch {
	case err != nil:
		return notMeasured(row, fmt.Sprintf("created %s and deleted it; the retry %s%s", r1.TaskID, failure(err), counted))
	case tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: %s %s%s", r1.TaskID, r2.Outcome, r2.TaskID, counted)
		row.Consequence, row.Fix = consSecond, fixLookUp
	case r2.Outcome == taskservice.Created:
		row.Status, row.Answer = Caveat, "no (created again)"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: created %s%s", r1.TaskID, r2.TaskID, counted)
		row.Consequence = "a deleted task is created again by a late resend within the approval's lifetime"
		row.Fix = fixTombstone
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Caveat, "yes (conflict)"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: idempotency_conflict %s%s", r1.TaskID, r2.TaskID, counted)
		row.Consequence = "a late resend after a deletion is reported as a conflict, not as replayed"
		row.Fix = "answer a known key with the same body as replayed, also after its task was deleted"
	default:
		row.Status, row.Answer = Safe, "yes"
		deleted := ""
		if r2.TaskDeleted {
			deleted = " (task deleted)"
		}
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: replayed %s%s%s", r1.TaskID, r2.TaskID, deleted, counted)
	}
	return row
}

func (r *Rows) scope(_ context.Context) Row {
	row := Head(RowScope)
	r.mu.Lock()
	stores := make([]string, 0, len(r.stores))
	for s := range r.stores {
		stores = append(stores, s)
	}
	r.mu.Unlock()
	slices.Sort(stores)
	var seen string
	switch len(stores) {
	case 0:
		seen = "the answers name no store"
	case 1:
		seen = "every answer came from store " + stores[0]
	default:
		seen = fmt.Sprintf("the answers came from %d stores: %s", len(stores), strings.Join(stores, ", "))
	}
	row.Answer = r.t.Scope
	switch {
	case len(stores) > 1:
		row.Status = Unsafe
		if row.Answer == "" {
			row.Answer = "several stores"
		}
		row.Seen = "stated: " + orNone(r.t.Scope) + "; " + seen
		row.Consequence = "a resend may reach a store that has not seen the key, and create a second task"
		row.Fix = fixOneScope
	case r.t.Scope == "":
		row.Status, row.Answer = Unknown, "not stated"
		row.Seen = "the adapter does not state its scope; " + seen
	default:
		row.Status = Safe
		row.Seen = "stated: " + r.t.Scope + "; " + seen
	}
	return row
}

// readAfterWrite checks what an adapter that decides a create by a lookup
// relies on: a lookup right after a create sees it. If it does not, a
// retry soon after a create (a lost reply, a redelivery) finds nothing and
// creates again.
func (r *Rows) readAfterWrite(ctx context.Context) Row {
	row := Head(RowReadAfterWrite)
	if r.t.Find == nil {
		return notApplicable(row, orDefault(r.t.FindWhyNot, "no lookup decides a create for this target"))
	}
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	fctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	res, found, err := r.t.Find(fctx, req)
	cancel()
	switch {
	case err != nil:
		return notMeasured(row, fmt.Sprintf("created %s; the lookup right after it %s", r1.TaskID, failure(err)))
	case !found:
		row.Status, row.Answer = Unsafe, "not seen"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found nothing", r1.TaskID)
		row.Consequence = "retries are unsafe: a retry soon after a create looks the key up, finds nothing and creates a second task"
		row.Fix = fixReadOwnWrites
	case res.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "another task"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found %s", r1.TaskID, res.TaskID)
		row.Consequence = "retries are unsafe: a lookup right after a create names another task than the one created"
		row.Fix = fixReadOwnWrites
	default:
		row.Status, row.Answer = Safe, "seen at once"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found %s (%s)", r1.TaskID, res.TaskID, res.Outcome)
	}
	return row
}

// naive sends two plain creates with one key, as a retry without the
// adapter's protocol would, and counts the tasks they made; it then deletes
// them again, so that the key's doubled tasks are not left for verify to
// report. It is measured for comparison and never judged.
func (r *Rows) naive(ctx context.Context) Row {
	row := Head(RowNaive)
	if r.t.Naive == nil {
		return notApplicable(row, orDefault(r.t.NaiveWhyNot, "the target offers no create that bypasses its key"))
	}
	row.Status = Info
	req := r.request(RowNaive, 0)
	row.IntentID = req.IntentID
	var seen []string
	ids := map[string]bool{}
	for range 2 {
		res, err := r.callOn(ctx, r.t.Naive, req, r.o.CallTimeout)
		if err != nil {
			seen = append(seen, failure(err))
			continue
		}
		ids[res.TaskID] = true
		seen = append(seen, fmt.Sprintf("%s %s", res.Outcome, res.TaskID))
	}
	tasks, counted := r.count(ctx, req.IntentID)
	if tasks < 0 {
		tasks = len(ids)
	}
	row.Answer = plural(tasks, "task")
	row.Seen = strings.Join(seen, ", then ") + counted
	if r.t.Delete != nil && r.own(req.IntentID) && strings.HasPrefix(req.IntentID, Prefix) && tasks != 0 {
		dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		err := r.t.Delete(dctx, Scope, req.IntentID)
		cancel()
		if err != nil {
			row.Seen += fmt.Sprintf("; deleting them again failed (%v): verify reports the key's tasks", err)
		} else {
			left, _ := r.count(ctx, req.IntentID)
			row.Seen += fmt.Sprintf("; deleted again, %s left", plural(max(left, 0), "task"))
		}
	}
	return row
}
