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
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

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
