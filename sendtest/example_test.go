package sendtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/sendtest"
)

// candidate is what an application extracted from a meeting: an action
// candidate, the first document of a request.
var candidate = []byte(`{
  "schema_version": "action-candidate.v1",
  "candidate_id": "cand-0001",
  "source": {"transcript_id": "transcript-weekly-sync-2026-11-27", "version": "v3"},
  "kind": "commitment",
  "summary": "Someone said in the meeting that they would add the missing checks to the notification settings",
  "speaker_ref": null,
  "evidence": [{"quote": "The notification settings are missing a few checks; I'll add them", "start_ms": 812000, "end_ms": 816500}]
}`)

// An application's test sends one approved request from two processes (two
// connections, say a service and its retry worker): the first receipt says
// created, the second replayed with the same task, and the task service
// received two requests, executed one create and holds one task. In a test
// function, sendtest.Start(t) replaces New and Close.
func Example() {
	p, err := sendtest.New()
	if err != nil {
		panic(err)
	}
	defer p.Close()

	request, err := approval.NewRequest(candidate, approval.Request{
		RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Add the missing notification checks",
	})
	if err != nil {
		panic(err)
	}
	approved, err := p.Approve(candidate, request)
	if err != nil {
		panic(err)
	}
	env, err := send.Build(send.Documents{Candidate: candidate, Request: request, Approval: approved})
	if err != nil {
		panic(err)
	}

	var tasks []string
	for _, process := range []string{"first process", "second process"} {
		js, err := p.Connect()
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, receipt, err := send.NewClient(js).Send(ctx, env)
		cancel()
		if err != nil {
			panic(err)
		}
		tasks = append(tasks, receipt.TaskID)
		fmt.Printf("%s: %s\n", process, receipt.Outcome)
	}
	fmt.Println("same task:", tasks[0] == tasks[1])

	counts, err := p.Counts(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Printf("requests received, creates executed, tasks existing: %d, %d, %d\n",
		counts.RequestsReceived, counts.CreatesExecuted, counts.TasksExisting)

	// Output:
	// first process: created
	// second process: replayed
	// same task: true
	// requests received, creates executed, tasks existing: 2, 1, 1
}
