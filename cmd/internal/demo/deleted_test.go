package demo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
)

// The row of step 4 is ok only for what a service that keeps a deleted
// task's key answers; what a service that forgot the key, or a run that
// never deleted the task, would show makes it differ.
func TestTheDeletedTaskRowDiffersUnlessTheResendIsReplayedAsDeleted(t *testing.T) {
	task := func(s string) *string { return &s }
	receipt := func(outcome, taskID string, deleted bool, requests, creates, tasks int64) *document.Receipt {
		return &document.Receipt{Outcome: outcome, TaskID: task(taskID), TaskDeleted: deleted,
			Counts: &document.Counts{RequestsReceived: requests, CreatesExecuted: creates, TasksExisting: tasks}}
	}
	for _, c := range []struct {
		name string
		rc   *document.Receipt
		ok   bool
	}{
		{"a replay of the first task, marked deleted, with counts 4, 1, 0 is ok",
			receipt(document.OutcomeReplayed, "fake-task-0001", true, 4, 1, 0), true},
		{"a service that created the task again differs",
			receipt(document.OutcomeCreated, "fake-task-0002", false, 4, 2, 1), false},
		{"a service that created again under the first task id differs",
			receipt(document.OutcomeCreated, "fake-task-0001", false, 4, 2, 1), false},
		{"a replay without the deleted mark (the delete skipped) differs",
			receipt(document.OutcomeReplayed, "fake-task-0001", false, 4, 1, 1), false},
		{"a replay marked deleted whose task still exists differs",
			receipt(document.OutcomeReplayed, "fake-task-0001", true, 4, 1, 1), false},
		{"a replay of another task differs",
			receipt(document.OutcomeReplayed, "fake-task-0002", true, 4, 1, 0), false},
		{"a resend the service never counted differs",
			receipt(document.OutcomeReplayed, "fake-task-0001", true, 3, 1, 0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := deletedRow(c.rc, "fake-task-0001")
			if row.OK != c.ok {
				t.Errorf("ok = %v, want %v: %+v", row.OK, c.ok, row)
			}
		})
	}
}

// Without the owner's delete the whole demo fails: step 4 differs, saying
// what it wants, and Run returns ErrMismatch (the command exits non-zero).
func TestTheDemoFailsWhenTheTaskIsNotDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rows, err := Run(ctx, Options{Dir: t.TempDir(), Out: &out, skipDelete: true})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch:\n%s", err, out.String())
	}
	if len(rows) < 4 || rows[3].Step != "4" || rows[3].OK || rows[3].Counts != "4, 1, 1" {
		t.Fatalf("rows: %+v\n%s", rows, out.String())
	}
	if !strings.Contains(out.String(), "DIFFERS, want replayed fake-task-0001 (task deleted); 4, 1, 0") {
		t.Errorf("the table does not say what step 4 wants:\n%s", out.String())
	}
	for i, row := range rows {
		if i != 3 && !row.OK {
			t.Errorf("row %d differs too: %+v", i+1, row)
		}
	}
}
