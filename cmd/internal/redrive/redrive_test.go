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

func TestEachRedriveIsANewMessageUnderAnUnpredictableIDAndIsRecorded(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dl, err := redrive.Get(ctx, env.JS, storeDeadLetter(t, env.JS, seedEnvelope(t), "1"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := redrive.OpenRecords(ctx, env.JS, true)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	ids := map[string]bool{}
	for range 2 {
		sent, err := redrive.Redrive(ctx, env.JS, recs, dl)
		if err != nil || sent.Duplicate {
			t.Fatalf("redrive: %+v, %v", sent, err)
		}
		seqs = append(seqs, sent.StreamSeq)
		id := approvalAt(t, env.JS, sent.StreamSeq).Header.Get(jetstream.MsgIDHeader)
		// "redrive-" and 26 base32 characters (130 random bits).
		if len(id) != len("redrive-")+26 || id[:len("redrive-")] != "redrive-" || ids[id] {
			t.Fatalf("message id %q: want redrive- and 128 random bits or more, new each time (had %v)", id, ids)
		}
		ids[id] = true
	}
	if got, err := recs.RedrivenAs(ctx, dl); err != nil || !slices.Equal(got, seqs) {
		t.Fatalf("recorded %v, %v; want dead letter %d redriven as %v", got, err, dl.Seq, seqs)
	}
	// A dead letter of an earlier DEADLETTERS stream with the same
	// sequence, stored at another time, is not taken for this one.
	other := *dl
	other.Stored = dl.Stored.Add(-time.Hour)
	if got, err := recs.RedrivenAs(ctx, &other); err != nil || len(got) != 0 {
		t.Fatalf("a dead letter stored at another time under sequence %d reads as redriven as %v, %v", dl.Seq, got, err)
	}
}

func TestADryRunMakesNoRecordBucket(t *testing.T) {
	env := testenv.Start(t)
	storeDeadLetter(t, env.JS, seedEnvelope(t), "1")
	if it := redriveOne(t, env.URL(), "--all", "--dry-run"); it.Action != "would_redrive" {
		t.Fatalf("redrive --all --dry-run: %+v", it)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.JS.KeyValue(ctx, redrive.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("after a dry run, bucket %s: %v; want none", redrive.Bucket, err)
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
	recs, err := redrive.OpenRecords(ctx, env.JS, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redrive.Redrive(ctx, env.JS, recs, dl); err == nil {
		t.Fatal("an empty dead letter was redriven")
	}
	if n := approvalsMsgs(t, env.JS); n != 0 {
		t.Fatalf("APPROVALS holds %d messages, want none", n)
	}
}

// msgIDHeader is the header of a message's id, which the stream
// deduplicates by.
const msgIDHeader = jetstream.MsgIDHeader

// publishAsTenant stores a message on tenant-a's approvals subject intent,
// as tenant-a may, with header set to value.
func publishAsTenant(t *testing.T, js jetstream.JetStream, intent, header, value string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := nats.NewMsg(subjects.Approval("tenant-a", intent))
	m.Data = []byte(`{"junk":true}`)
	m.Header.Set(header, value)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil || ack.Duplicate {
		t.Fatalf("the tenant's message: %+v, %v", ack, err)
	}
	return ack.Sequence
}

// approvalAt reads the APPROVALS message at seq.
func approvalAt(t *testing.T, js jetstream.JetStream, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m *jetstream.RawStreamMsg
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err == nil {
		m, err = s.GetMsg(ctx, seq)
	}
	if err != nil {
		t.Fatalf("reading approvals message %d: %v", seq, err)
	}
	return m
}
