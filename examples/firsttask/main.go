// Command firsttask sends one approved task from Go: it connects to NATS,
// makes a candidate and its request, approves the request with a reviewer's
// key, checks it as the executors will, sends it and prints the receipt.
// Run twice against a running executor, it prints created, then replayed
// with the same task.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/send"
)

func main() {
	receipt, err := run(context.Background(), cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL),
		"keys/alice.key", "keys/trusted-approvers.json")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(receipt.Outcome, receipt.TaskID)
}

func run(ctx context.Context, url, keyFile, trustedFile string) (*send.Receipt, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	candidate, err := approval.NewCandidate(approval.Candidate{
		CandidateID: "cand-0001", TranscriptID: "weekly-sync-2026-12-04", TranscriptVersion: "v1", Kind: "commitment",
		Summary:  "Someone will add the missing notification checks",
		Evidence: []approval.Evidence{{Quote: "I'll add the missing checks", StartMS: 812000, EndMS: 816500}},
	})
	if err != nil {
		return nil, err
	}
	request, err := approval.NewRequest(candidate, approval.Request{
		RequestID: "task-request-0001", IntentID: "intent-from-go-0001", Title: "Add the missing notification checks",
	})
	if err != nil {
		return nil, err
	}
	key, err := approval.LoadKey(keyFile) // made by publisher keygen
	if err != nil {
		return nil, err
	}
	approved, err := approval.Approve(candidate, request, approval.Options{Key: key})
	if err != nil {
		return nil, err
	}
	docs := send.Documents{Candidate: candidate, Request: request, Approval: approved}
	trusted, err := send.LoadTrustedApprovers(trustedFile)
	if err != nil {
		return nil, err
	}
	if _, err := send.Trusted(trusted).Documents(docs); err != nil {
		return nil, err // a *send.Refusal names the check, the path and the reason; nothing was published
	}
	env, err := send.Build(docs)
	if err != nil {
		return nil, err
	}
	// errors.Is(err, send.ErrNoReceipt): published, no receipt yet; sending again is safe.
	_, receipt, err := send.NewClient(js).Send(ctx, env, send.Timeout(30*time.Second))
	return receipt, err
}
