package executor_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
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

// BenchmarkReceiptBatch stores receipt-sized messages on a stream configured
// like RECEIPTS (file storage, fsync before every ack), as the executor
// does: "alone" publishes each and waits for its ack; "batch=N" publishes N
// as one atomic batch whose commit is a request, as the executor's receipt
// batches are. One op is one receipt stored.
func BenchmarkReceiptBatch(b *testing.B) {
	js := testenv.JetStream(b)
	nc := js.Conn()
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, topology.ReceiptsConfig(topology.Config{})); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 600)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	receipt := func(i int) *nats.Msg {
		m := nats.NewMsg(subjects.Receipt("", fmt.Sprintf("intent-bench-%07d", i)))
		m.Data = body
		m.Header.Set(topology.HeaderOutcome, "created")
		m.Header.Set(topology.HeaderStreamSeq, strconv.Itoa(i))
		m.Header.Set(topology.HeaderDelivered, "1")
		m.Header.Set(jetstream.MsgIDHeader, "receipt-"+nuid.Next())
		m.Header.Set(jetstream.ExpectedStreamHeader, topology.ReceiptsStream)
		return m
	}
	b.Run("alone", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := js.PublishMsg(ctx, receipt(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
	})
	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			batches := 0
			for i := 0; i < b.N; {
				n := min(size, b.N-i)
				id := nuid.Next()
				for k := range n {
					m := receipt(i + k)
					m.Header.Set("Nats-Batch-Id", id)
					m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(k+1))
					if k < n-1 {
						if err := nc.PublishMsg(m); err != nil {
							b.Fatal(err)
						}
						continue
					}
					m.Header.Set("Nats-Batch-Commit", "1")
					reply, err := nc.RequestMsg(m, 30*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if len(reply.Data) == 0 || reply.Data[0] != '{' || string(reply.Data[:8]) == `{"error"` {
						b.Fatalf("commit answered %s", reply.Data)
					}
				}
				i += n
				batches++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(max(batches, 1)), "ms/batch")
		})
	}
}
