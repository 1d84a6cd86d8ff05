package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
)

// Sent from this process (no Options.Process), the story against the fake
// task service is all ok, and its table is the one the command prints.
func TestTheDemoStoryFromThisProcessIsAllOk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rows, err := demo.Run(ctx, demo.Options{Dir: t.TempDir(), Out: &out})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	want := []struct{ step, receipt, counts string }{
		{"1", "created fake-task-0001", "1, 1, 1"},
		{"2", "replayed fake-task-0001", "2, 1, 1"},
		{"3", "idempotency_conflict fake-task-0001", "3, 1, 1"},
		{"4", "replayed fake-task-0001 (task deleted)", "4, 1, 0"},
		{"fresh service", "created, created", "2, 2, 2"},
		{"8 tampered messages", "rejected at approval_format, candidate_binding, request_binding, capability, signature", "2, 2, 2 → 2, 2, 2"},
		{"one publish, reply dropped", "replayed fake-task-0001", "2, 1, 1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out.String())
	}
	for i, w := range want {
		r := rows[i]
		if r.Step != w.step || !strings.HasSuffix(r.Receipt, w.receipt) || r.Counts != w.counts || !r.OK {
			t.Errorf("row %d: %+v, want step %q, receipt %q, counts %q, ok", i+1, r, w.step, w.receipt, w.counts)
		}
	}
	if !strings.HasPrefix(out.String(), "step  ") || strings.Contains(out.String(), "DIFFERS") {
		t.Errorf("the table:\n%s", out.String())
	}
	for _, r := range rows {
		if r.Shows == "" {
			t.Errorf("row %q does not say what it shows", r.Step)
		}
	}
	for _, says := range []string{
		"What each row shows",
		"  fresh service               The service starts on a new, empty store, on purpose",
		"so its\n                              first task is numbered fake-task-0001 again",
	} {
		if !strings.Contains(out.String(), says) {
			t.Errorf("the output does not say %q:\n%s", says, out.String())
		}
	}
}
