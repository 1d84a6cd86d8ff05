package redrive_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// storeDeadLetter stores a dead letter as an executor does, for approvals
// message approvalSeq, and returns its sequence.
func storeDeadLetter(t *testing.T, js jetstream.JetStream, payload []byte, approvalSeq string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := nats.NewMsg(subjects.DeadLetter("", "intent-0001"))
	m.Data = payload
	m.Header.Set(topology.HeaderReason, "task service call failed on delivery 4 of 4: no responders")
	m.Header.Set(topology.HeaderStreamSeq, approvalSeq)
	m.Header.Set(topology.HeaderDelivered, "4")
	m.Header.Set(topology.HeaderExecutor, "exec-1")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func approvalsMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	return testenv.StreamState(t, js, topology.ApprovalsStream).Msgs
}

func seedEnvelope(t *testing.T) []byte {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s.Original.Envelope()
}

func TestADeadLetterReadsBackWithItsOriginalMessageAndReason(t *testing.T) {
	env := testenv.Start(t)
	payload := seedEnvelope(t)
	seq := storeDeadLetter(t, env.JS, payload, "7")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dl, err := redrive.Get(ctx, env.JS, seq)
	if err != nil {
		t.Fatal(err)
	}
	if dl.Seq != seq || dl.ApprovalSeq != 7 || dl.IntentID != "intent-0001" || dl.Delivered != 4 || dl.Executor != "exec-1" ||
		dl.Reason == "" || string(dl.Envelope) != string(payload) {
		t.Fatalf("read back %+v", dl)
	}
	all, err := redrive.List(ctx, env.JS)
	if err != nil || len(all) != 1 || all[0].Seq != seq || string(all[0].Envelope) != string(payload) {
		t.Fatalf("List: %v, %v", all, err)
	}
	if _, err := redrive.Get(ctx, env.JS, seq+1); !errors.Is(err, redrive.ErrNoDeadLetter) {
		t.Fatalf("Get of a sequence past the end: %v, want ErrNoDeadLetter", err)
	}
}

func TestTwoRedrivesOfOneDeadLetterWithinTheDuplicateWindowAreStoredOnce(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dl, err := redrive.Get(ctx, env.JS, storeDeadLetter(t, env.JS, seedEnvelope(t), "1"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := redrive.Redrive(ctx, env.JS, dl, false)
	if err != nil || first.Duplicate {
		t.Fatalf("first redrive: %+v, %v", first, err)
	}
	second, err := redrive.Redrive(ctx, env.JS, dl, false)
	if err != nil || !second.Duplicate || second.StreamSeq != first.StreamSeq {
		t.Fatalf("second redrive: %+v, %v; want the first message, as a duplicate", second, err)
	}
	forced, err := redrive.Redrive(ctx, env.JS, dl, true)
	if err != nil || forced.Duplicate || forced.StreamSeq == first.StreamSeq {
		t.Fatalf("forced redrive: %+v, %v; want a new message", forced, err)
	}
	if n := approvalsMsgs(t, env.JS); n != 2 {
		t.Fatalf("APPROVALS holds %d messages, want the redrive and the forced one", n)
	}
	done, err := redrive.Redriven(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{first.StreamSeq, forced.StreamSeq}; !slices.Equal(done[dl.Seq], want) || len(done) != 1 {
		t.Fatalf("Redriven = %v, want dead letter %d redriven as %v", done, dl.Seq, want)
	}
}

func TestADeadLetterWithoutAPayloadIsNotRedriven(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dl, err := redrive.Get(ctx, env.JS, storeDeadLetter(t, env.JS, nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redrive.Redrive(ctx, env.JS, dl, false); err == nil {
		t.Fatal("an empty dead letter was redriven")
	}
	if n := approvalsMsgs(t, env.JS); n != 0 {
		t.Fatalf("APPROVALS holds %d messages, want none", n)
	}
}
