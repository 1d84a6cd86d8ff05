package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/send"
)

func TestExecutorSendPrintsTheScopeAndADeletedTask(t *testing.T) {
	for _, c := range []struct {
		name      string
		r         send.Receipt
		want, not string
	}{
		{"a replay of a deleted task in team-a names both",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "team-a", TaskDeleted: true},
			"replayed: task fake-task-0001, intent intent-0001 in scope team-a, stream message 7, delivery 1; the task was deleted since, nothing was created again", ""},
		{"a replay in default reads as before",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "default"},
			"replayed: task fake-task-0001, intent intent-0001, stream message 7, delivery 1\n", "scope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.r.Delivery.Delivered = 1
			var b bytes.Buffer
			publish.PrintSentReceipt(&b, send.Sent{StreamSeq: 7}, &c.r)
			if !strings.HasPrefix(b.String(), c.want) || (c.not != "" && strings.Contains(b.String(), c.not)) {
				t.Fatalf("printed %q, want %q and no %q", b.String(), c.want, c.not)
			}
		})
	}
}
