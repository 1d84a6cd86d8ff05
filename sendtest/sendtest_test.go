package sendtest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/sendtest"
)

// sendOnce builds the documents into an envelope and sends it on a new
// connection of p.
func sendOnce(t *testing.T, p *sendtest.Pipeline, docs send.Documents) *send.Receipt {
	t.Helper()
	env, err := send.Build(docs)
	if err != nil {
		t.Fatal(err)
	}
	js, err := p.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, r, err := send.NewClient(js).Send(ctx, env)
	if err != nil {
		t.Fatalf("sending: %v", err)
	}
	return r
}

func newRequest(t *testing.T) []byte {
	t.Helper()
	r, err := approval.NewRequest(candidate, approval.Request{RequestID: "task-request-0001", IntentID: "intent-0001", Title: "Add the checks"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestThePipelineListensOnLoopbackOnly(t *testing.T) {
	p := sendtest.Start(t)
	if !strings.HasPrefix(p.URL(), "nats://127.0.0.1:") {
		t.Errorf("the server listens at %s, want 127.0.0.1", p.URL())
	}
}

// The executor trusts the kit's reviewer, and no one else: an approval
// without a signature, or signed by another key, is rejected at the
// signature, by the local check and by the executor alike.
func TestOnlyTheReviewersSignatureIsAccepted(t *testing.T) {
	p := sendtest.Start(t)
	request := newRequest(t)
	other, err := approval.NewKey(sendtest.ReviewerName)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    approval.Options
	}{
		{"unsigned", approval.Options{By: sendtest.ReviewerName}},
		{"signed by another key under the reviewer's name", approval.Options{Key: other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			approved, err := approval.Approve(candidate, request, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			docs := send.Documents{Candidate: candidate, Request: request, Approval: approved}
			if _, err := send.Trusted(p.Trusted()).Documents(docs); err == nil {
				t.Error("the local check against the kit's trusted approvers passed")
			}
			r := sendOnce(t, p, docs)
			if r.Outcome != send.Rejected || r.Rejection == nil || r.Rejection.Check != send.CheckSignature {
				t.Errorf("the executor answered %s (%+v), want rejected at the signature", r.Outcome, r.Rejection)
			}
		})
	}
	c, err := p.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c != (send.Counts{}) {
		t.Errorf("the task service was called: %+v", c)
	}
}

// A reply the service drops after it created the task: the message comes
// back, the service replays, and the one receipt says replayed with
// counts 2, 1, 1.
func TestADroppedReplyIsAnsweredReplayed(t *testing.T) {
	p := sendtest.Start(t)
	request := newRequest(t)
	approved, err := p.Approve(candidate, request)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.DropReplies(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r := sendOnce(t, p, send.Documents{Candidate: candidate, Request: request, Approval: approved})
	if r.Outcome != send.Replayed || r.Counts == nil || *r.Counts != (send.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1}) {
		t.Errorf("the receipt says %s with counts %+v, want replayed with 2, 1, 1", r.Outcome, r.Counts)
	}
}

// Close leaves nothing of what New made, and refuses what comes after.
func TestCloseLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where New makes its directory
	p, err := sendtest.New()
	if err != nil {
		t.Fatal(err)
	}
	if made, _ := os.ReadDir(tmp); len(made) == 0 {
		t.Fatal("New made no directory under TMPDIR")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("after Close, TMPDIR holds %v (%v)", left, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := p.Connect(); !errors.Is(err, sendtest.ErrClosed) {
		t.Errorf("Connect after Close: %v; want ErrClosed", err)
	}
	if _, err := p.Counts(context.Background()); !errors.Is(err, sendtest.ErrClosed) {
		t.Errorf("Counts after Close: %v; want ErrClosed", err)
	}
	if err := p.DropReplies(context.Background(), 1); !errors.Is(err, sendtest.ErrClosed) {
		t.Errorf("DropReplies after Close: %v; want ErrClosed", err)
	}
}
