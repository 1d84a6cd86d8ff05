package send_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/executor"
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

// A Timeout option counts from the start of each call it is given to, not
// from when it was made: options built once serve every later call.
func TestATimeoutMadeOnceBoundsEachCallFromItsStart(t *testing.T) {
	env := testenv.Start(t)
	opts := []send.Option{send.Timeout(time.Second)}
	time.Sleep(1100 * time.Millisecond) // the option is older than its timeout
	sent, err := send.NewClient(env.JS).Publish(context.Background(), parsed(t), opts...)
	if err != nil || sent.StreamSeq == 0 {
		t.Fatalf("a publish with a Timeout option made before its duration passed: %+v, %v; want it stored", sent, err)
	}
}

// One message id names one envelope: a client refuses an id it published
// for another envelope, before listening or publishing, so that no Send
// waits for the receipt of another envelope's message. The same envelope
// under its own id again is a retry the stream stores once.
func TestAMessageIDUsedForAnotherEnvelopeIsRefused(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	original, err := send.ParseEnvelope(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	changed, err := send.ParseEnvelope(s.Changed.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	c := send.NewClient(env.JS)
	if _, err := c.Publish(ctx, original, send.MsgID("send-one-envelope")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, changed, send.MsgID("send-one-envelope")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("publishing another envelope under a used id: %v; want ErrOption", err)
	}
	if _, _, err := c.Send(ctx, changed, send.MsgID("send-one-envelope")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("sending another envelope under a used id: %v; want ErrOption", err)
	}
	if n := lastSeq(t, env.JS); n != 1 {
		t.Fatalf("the APPROVALS stream holds %d messages, want the first only", n)
	}
	again, err := c.Publish(ctx, original, send.MsgID("send-one-envelope"))
	if err != nil || !again.Duplicate || again.StreamSeq != 1 {
		t.Fatalf("the same envelope under its id again: %+v, %v; want the stored message", again, err)
	}
}

// consumers counts the consumers of stream.
func consumers(t *testing.T, env *testenv.Env, stream string) int {
	t.Helper()
	return testenv.StreamState(t, env.JS, stream).Consumers
}

// A publisher that may create no consumer (nor read stream information)
// sends and waits for its receipts: created, then replayed, whichever way
// it waits, and the server refused it nothing.
func TestAPublisherThatMayCreateNoConsumerGetsItsReceipts(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	env.Executor(executor.Config{ID: "exec-1"})
	e := built(t)
	js, violations := env.ConnectPublisher()
	c := send.NewClient(js)
	for _, tc := range []struct {
		name string
		wait func(ctx context.Context) (send.Sent, *send.Receipt, error)
		want send.Outcome
	}{
		{"Send publishes and waits: created", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			return c.Send(ctx, e)
		}, send.Created},
		{"Publish and then WaitReceipt: replayed", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			sent, err := c.Publish(ctx, e)
			if err != nil {
				return sent, nil, err
			}
			r, err := c.WaitReceipt(ctx, sent)
			return sent, r, err
		}, send.Replayed},
		{"Listen, Publish and Receipt: replayed", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			l, err := c.Listen(e)
			if err != nil {
				return send.Sent{}, nil, err
			}
			defer l.Close()
			sent, err := c.Publish(ctx, e)
			if err != nil {
				return sent, nil, err
			}
			r, err := l.Receipt(ctx, sent)
			return sent, r, err
		}, send.Replayed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sent, r, err := tc.wait(ctx)
			if err != nil {
				t.Fatalf("%v (the server refused: %v)", err, violations.Seen())
			}
			if r.Outcome != tc.want || r.Delivery.StreamSeq != sent.StreamSeq || r.TaskID != "fake-task-0001" {
				t.Fatalf("receipt %s for message %d, want %s of fake-task-0001", r.Raw, sent.StreamSeq, tc.want)
			}
		})
	}
	if v := violations.Seen(); len(v) > 0 {
		t.Errorf("the server refused the publisher: %v", v)
	}
	if n := consumers(t, env, topology.ReceiptsStream); n != 0 {
		t.Errorf("RECEIPTS has %d consumers, want none", n)
	}
}

// The publisher's rights are what the test says they are: it may not
// create a consumer on RECEIPTS, so the receipts above came without one.
func TestThePublisherOfTheTestsMayCreateNoConsumer(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	js, _ := env.ConnectPublisher()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := js.OrderedConsumer(ctx, topology.ReceiptsStream, jetstream.OrderedConsumerConfig{})
	if err == nil {
		t.Fatal("the publisher created an ordered consumer on RECEIPTS")
	}
	_, err = js.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "mine"})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("the publisher created a durable consumer on RECEIPTS: %v", err)
	}
}

// A listener that cannot subscribe says so once, in send's words: one
// "send: " prefix, with the subject and the connection's cause.
func TestAListenFailureSaysSendOnce(t *testing.T) {
	env := testenv.Start(t)
	nc, err := nats.Connect(env.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := send.NewClient(js)
	nc.Close()
	l := c.NewListener()
	defer l.Close()
	err = l.WatchKey("", "intent-0001")
	if err == nil || strings.Count(err.Error(), "send: ") != 1 || !strings.HasPrefix(err.Error(), "send: ") || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("listening on a closed connection: %v; want one \"send: \" prefix and the connection's error", err)
	}
}
