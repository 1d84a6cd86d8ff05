package send_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/sendtest"
)

// A service that holds the three documents checks them, sends them, and
// sends them again after (say) a timeout: the second receipt says replayed,
// with the same task, and the task service created one task. A request
// edited after its approval is refused locally and never published.
func Example() {
	// The deployment: a NATS server, the fake task service and an executor
	// that trusts one reviewer (sendtest stands in for them here).
	p, err := sendtest.New()
	if err != nil {
		panic(err)
	}
	defer p.Close()

	candidate := []byte(`{"schema_version": "action-candidate.v1", "candidate_id": "cand-0001",
		"source": {"transcript_id": "transcript-weekly-sync-2026-11-27", "version": "v3"}, "kind": "commitment",
		"summary": "Someone said they would add the missing checks", "speaker_ref": null,
		"evidence": [{"quote": "I'll add the missing checks", "start_ms": 812000, "end_ms": 816500}]}`)
	request, err := approval.NewRequest(candidate, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Add the missing checks"})
	if err != nil {
		panic(err)
	}
	approved, err := p.Approve(candidate, request)
	if err != nil {
		panic(err)
	}
	docs := send.Documents{Candidate: candidate, Request: request, Approval: approved}

	// The executors' checks, run locally against their trusted approvers.
	if _, err := send.Trusted(p.Trusted()).Documents(docs); err != nil {
		panic(err)
	}
	fmt.Println("local check: pass")

	// A request edited after its approval no longer matches it.
	edited := docs
	edited.Request, err = approval.NewRequest(candidate, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Delete the checks"})
	if err != nil {
		panic(err)
	}
	if _, err := send.Bindings().Documents(edited); errors.Is(err, send.ErrRefused) {
		fmt.Println("edited request: refused locally; nothing published")
	}

	js, err := p.Connect()
	if err != nil {
		panic(err)
	}
	client := send.NewClient(js)
	env, err := send.Build(docs)
	if err != nil {
		panic(err)
	}
	for _, attempt := range []string{"first send", "second send"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, r, err := client.Send(ctx, env)
		cancel()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s %s; requests received %d, creates executed %d, tasks existing %d\n", attempt, r.Outcome, r.TaskID,
			r.Counts.RequestsReceived, r.Counts.CreatesExecuted, r.Counts.TasksExisting)
	}

	// Output:
	// local check: pass
	// edited request: refused locally; nothing published
	// first send: created fake-task-0001; requests received 1, creates executed 1, tasks existing 1
	// second send: replayed fake-task-0001; requests received 2, creates executed 1, tasks existing 1
}
