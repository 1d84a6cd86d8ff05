package executor_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// batchServer is a real embedded server with one stream, BATCHES on
// batches.>, that allows atomic publish (or not).
func batchServer(t *testing.T, atomic bool) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	js := testenv.JetStream(t)
	nc := js.Conn()
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "BATCHES", Subjects: []string{"batches.>"}, AllowAtomicPublish: atomic}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func batchMsgs(n int) []*nats.Msg {
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = &nats.Msg{Subject: "batches." + strconv.Itoa(i), Data: []byte("m" + strconv.Itoa(i)), Header: nats.Header{"Keep": {"yes"}}}
	}
	return msgs
}

// A batch is stored whole, at consecutive sequences that the ack gives, and
// the messages handed in are not changed; a single message is published
// alone.
func TestPublishBatchStoresTheBatchWholeAndSaysWhere(t *testing.T) {
	nc, js := batchServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := executor.PublishBatch(ctx, nc, "BATCHES", batchMsgs(1)); err != nil {
		t.Fatalf("one message alone: %v", err)
	}
	msgs := batchMsgs(5)
	ack, err := executor.PublishBatch(ctx, nc, "BATCHES", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Count != 5 || ack.Stream != "BATCHES" {
		t.Errorf("ack %+v; want 5 messages on BATCHES", ack)
	}
	st, err := js.Stream(ctx, "BATCHES")
	if err != nil {
		t.Fatal(err)
	}
	seqs := ack.Seqs(5)
	for i, seq := range seqs {
		if seq != uint64(2+i) {
			t.Fatalf("sequences %v; want 2 to 6", seqs)
		}
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != "m"+strconv.Itoa(i) {
			t.Errorf("sequence %d holds %q; want message %d", seq, m.Data, i)
		}
	}
	for i, m := range msgs {
		if len(m.Header) != 1 || m.Header.Get("Keep") != "yes" {
			t.Errorf("message %d was changed: headers %v", i, m.Header)
		}
	}
}

// A stream that does not allow atomic publish refuses the batch with the
// server's error, and stores none of it.
func TestPublishBatchOnAStreamWithoutAtomicPublishStoresNothing(t *testing.T) {
	nc, js := batchServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := executor.PublishBatch(ctx, nc, "BATCHES", batchMsgs(3))
	if err == nil {
		t.Fatal("the batch was accepted")
	}
	s, err := js.Stream(ctx, "BATCHES")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d messages stored", n)
	}
}
