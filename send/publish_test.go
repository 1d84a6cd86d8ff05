package send_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

func envelope(t *testing.T) []byte {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s.Original.Envelope()
}

// parsed is the scenario's original envelope.
func parsed(t *testing.T) *send.Envelope {
	t.Helper()
	e, err := send.ParseEnvelope(envelope(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func lastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	return testenv.StreamState(t, js, topology.ApprovalsStream).LastSeq
}

func TestPublishStoresTheCallersHeadersBesideItsMessageID(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set("Sendtwice-Test", "kept")
	sent, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-with-headers-1"), send.Header(h))
	if err != nil {
		t.Fatal(err)
	}
	if sent.Subject != subjects.Approval("", "intent-0001") || sent.IntentID != "intent-0001" || sent.Duplicate {
		t.Fatalf("sent %+v", sent)
	}
	s, err := env.JS.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, sent.StreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Sendtwice-Test") != "kept" || m.Header.Get(jetstream.MsgIDHeader) != "send-with-headers-1" {
		t.Fatalf("stored headers %v", m.Header)
	}
	again, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-with-headers-1"), send.Header(h))
	if err != nil || !again.Duplicate || again.StreamSeq != sent.StreamSeq {
		t.Fatalf("a retry with the same id: %+v, %v; want the first message, as a duplicate", again, err)
	}
}

func TestPublishRefusesAMessageIDInTheHeadersAndStoresNothing(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set(jetstream.MsgIDHeader, "smuggled")
	if _, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-own-id"), send.Header(h)); !errors.Is(err, send.ErrOption) || !strings.HasPrefix(err.Error(), "send: ") {
		t.Fatalf("a message id in the headers: %v; want send.ErrOption", err)
	}
	if n := lastSeq(t, env.JS); n != 0 {
		t.Fatalf("the APPROVALS stream holds %d messages, want none", n)
	}
}

func TestTheDeadlineBoundsThePublishAndTheWait(t *testing.T) {
	env := testenv.Start(t) // no executor: no receipt ever comes
	c := send.NewClient(env.JS)
	if _, err := c.Publish(context.Background(), parsed(t), send.Deadline(time.Now().Add(-time.Second))); !errors.Is(err, send.ErrNotPublished) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a publish past its deadline: %v; want ErrNotPublished and the deadline", err)
	}
	if n := lastSeq(t, env.JS); n != 0 {
		t.Fatalf("the APPROVALS stream holds %d messages, want none", n)
	}
	sent, r, err := c.Send(context.Background(), parsed(t), send.Timeout(500*time.Millisecond))
	var ended *send.NoReceiptError
	if r != nil || !errors.As(err, &ended) || !errors.Is(err, context.DeadlineExceeded) || ended.StreamSeq != sent.StreamSeq || sent.StreamSeq == 0 {
		t.Fatalf("a send whose receipt never comes: %+v, %v, %v; want a NoReceiptError at the deadline for its message", sent, r, err)
	}
	if _, err := c.Publish(context.Background(), parsed(t), send.MsgID("")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("an empty message id: %v; want ErrOption", err)
	}
}
