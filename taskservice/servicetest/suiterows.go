package servicetest

import (
	"context"
	"fmt"

	"github.com/sendtwice/sendtwice/taskservice"
)

// otherIntentSuffix ends the second intent id of RowOtherIntent, and
// OtherScope is the second scope of RowScopesApart.
const (
	otherIntentSuffix = "-2"
	OtherScope        = Scope + "-other"
)

// otherIntent sends the same content under a second intent id: it is
// another key, so it must create a task of its own, not replay the first.
func (r *Rows) otherIntent(ctx context.Context) Row {
	row := Head(RowOtherIntent)
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	other := r.complete(Scope, req.IntentID+otherIntentSuffix, req.RequestID+otherIntentSuffix, req.Task.Title)
	r2, _, err := r.callRetry(ctx, other)
	switch {
	case err != nil:
		return notMeasured(row, fmt.Sprintf("created %s; the other intent id %s", r1.TaskID, failure(err)))
	case r2.Outcome != taskservice.Created || r2.TaskID == r1.TaskID:
		row.Status, row.Answer = Unsafe, string(r2.Outcome)
		row.Seen = fmt.Sprintf("created %s; the other intent id with the same content: %s %s", r1.TaskID, r2.Outcome, r2.TaskID)
		row.Consequence = "two approved intents with the same content get one task: the second is lost"
		row.Fix = "key tasks by the intent id, never by their content"
	default:
		row.Status, row.Answer = Safe, "created"
		row.Seen = fmt.Sprintf("created %s; the other intent id with the same content: created %s", r1.TaskID, r2.TaskID)
	}
	return row
}

// scopesApart sends one intent id in two scopes: two keys, two tasks, and
// a resend in each scope replays its own.
func (r *Rows) scopesApart(ctx context.Context) Row {
	row := Head(RowScopesApart)
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	other := r.complete(OtherScope, req.IntentID, req.RequestID, req.Task.Title)
	r2, _, err := r.callRetry(ctx, other)
	if err != nil {
		return notMeasured(row, fmt.Sprintf("created %s; the call in scope %s %s", r1.TaskID, OtherScope, failure(err)))
	}
	again, _, err1 := r.callRetry(ctx, req)
	againOther, _, err2 := r.callRetry(ctx, other)
	row.Seen = fmt.Sprintf("created %s in scope %s; in scope %s: %s %s", r1.TaskID, Scope, OtherScope, r2.Outcome, r2.TaskID)
	switch {
	case r2.Outcome != taskservice.Created || r2.TaskID == r1.TaskID:
		row.Status, row.Answer = Unsafe, "one key"
		row.Consequence = "one intent id in two scopes gets one task: a scope is answered with another scope's task"
		row.Fix = "key tasks by the pair (scope, intent id)"
	case err1 != nil || err2 != nil:
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen += fmt.Sprintf("; the resends failed: %v, %v", err1, err2)
	case again.Outcome != taskservice.Replayed || again.TaskID != r1.TaskID || againOther.Outcome != taskservice.Replayed || againOther.TaskID != r2.TaskID:
		row.Status, row.Answer = Unsafe, "resends mixed up"
		row.Seen += fmt.Sprintf("; the resends: %s %s, %s %s", again.Outcome, again.TaskID, againOther.Outcome, againOther.TaskID)
		row.Consequence = "a resend in one scope is not answered with its own scope's task"
		row.Fix = "key tasks by the pair (scope, intent id)"
	default:
		row.Status, row.Answer = Safe, "two keys"
		row.Seen += fmt.Sprintf("; the resends replayed %s and %s", again.TaskID, againOther.TaskID)
	}
	return row
}

// restart creates, restarts the service (Target.Restart) and resends: the
// key must have outlived the restart.
func (r *Rows) restart(ctx context.Context) Row {
	row := Head(RowRestart)
	if r.t.Restart == nil {
		return notMeasured(row, "the target has no way to restart the service")
	}
	req, r1, ok := r.open(ctx, &row)
	if !ok {
		return row
	}
	svc, err := r.t.Restart(ctx)
	if err != nil || svc == nil {
		return notMeasured(row, fmt.Sprintf("created %s; the restart failed: %v", r1.TaskID, err))
	}
	r.t.Service = svc
	r2, _, err := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	switch {
	case err != nil:
		return notMeasured(row, fmt.Sprintf("created %s, restarted; the resend %s%s", r1.TaskID, failure(err), counted))
	case r2.Outcome != taskservice.Replayed || r2.TaskID != r1.TaskID || tasks > 1:
		row.Status, row.Answer = Unsafe, "forgotten"
		row.Seen = fmt.Sprintf("created %s, restarted; the resend: %s %s%s", r1.TaskID, r2.Outcome, r2.TaskID, counted)
		row.Consequence = "a resend after a restart is not recognised: it creates a second task or is refused"
		row.Fix = "keep keys in durable storage, written in the same step as the task"
	default:
		row.Status, row.Answer = Safe, "replayed"
		row.Seen = fmt.Sprintf("created %s, restarted; the resend: replayed %s%s", r1.TaskID, r2.TaskID, counted)
	}
	return row
}
