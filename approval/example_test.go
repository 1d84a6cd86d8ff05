package approval_test

import (
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/send"
)

// A reviewer's key signs the approval of one request; the executors, which
// trust the key's public half, accept it, and refuse it for a request
// edited after it was approved.
func Example() {
	// What the application extracted from a meeting: an action candidate.
	candidate := []byte(`{"schema_version": "action-candidate.v1", "candidate_id": "cand-0001",
		"source": {"transcript_id": "transcript-weekly-sync-2026-11-27", "version": "v3"}, "kind": "commitment",
		"summary": "Someone said they would add the missing checks", "speaker_ref": null,
		"evidence": [{"quote": "I'll add the missing checks", "start_ms": 812000, "end_ms": 816500}]}`)

	// The task to make of it, under the intent id the task service
	// remembers it by.
	request, err := approval.NewRequest(candidate, approval.Request{
		RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Add the missing checks",
	})
	if err != nil {
		panic(err)
	}

	// The reviewer approves it with their key (key.Save writes it to disk;
	// approval.LoadKey reads it back).
	key, err := approval.NewKey("alice")
	if err != nil {
		panic(err)
	}
	approved, err := approval.Approve(candidate, request, approval.Options{Key: key})
	if err != nil {
		panic(err)
	}

	// The executors trust the key's public half (their trusted-approvers
	// file); the same check runs here before anything is sent.
	trusted, err := send.NewTrustedApprovers(key.Approver())
	if err != nil {
		panic(err)
	}
	verdict, err := send.Trusted(trusted).Documents(send.Documents{Candidate: candidate, Request: request, Approval: approved})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s of %s: signed by %s\n", verdict.RequestID, verdict.IntentID, verdict.SignedBy)

	// The approval names the request by its digest: another title under
	// the same ids is not what the reviewer approved.
	edited, err := approval.NewRequest(candidate, approval.Request{
		RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Delete the checks",
	})
	if err != nil {
		panic(err)
	}
	_, err = send.Trusted(trusted).Documents(send.Documents{Candidate: candidate, Request: edited, Approval: approved})
	var refusal *send.Refusal
	if errors.As(err, &refusal) {
		fmt.Println("edited request refused at", refusal.Check)
	}
	// Output:
	// task-request-0001 of intent-0001: signed by alice
	// edited request refused at request_binding
}
