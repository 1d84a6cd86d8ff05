package publish_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/publish"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func envelope(t *testing.T) []byte {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s.Original.Envelope()
}

func lastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

func TestSendWithHeadersStoresTheCallersHeadersBesideItsOwnMessageID(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set("Sendtwice-Test", "kept")
	sent, err := publish.SendWithHeaders(ctx, env.JS, envelope(t), "send-with-headers-1", h)
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
	again, err := publish.SendWithHeaders(ctx, env.JS, envelope(t), "send-with-headers-1", h)
	if err != nil || !again.Duplicate || again.StreamSeq != sent.StreamSeq {
		t.Fatalf("a retry with the same id: %+v, %v; want the first message, as a duplicate", again, err)
	}
}

func TestSendWithHeadersRefusesAMessageIDInTheHeadersAndStoresNothing(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set(jetstream.MsgIDHeader, "smuggled")
	if _, err := publish.SendWithHeaders(ctx, env.JS, envelope(t), "send-own-id", h); err == nil {
		t.Fatal("a message id in the headers was accepted")
	}
	if n := lastSeq(t, env.JS); n != 0 {
		t.Fatalf("the APPROVALS stream holds %d messages, want none", n)
	}
}
