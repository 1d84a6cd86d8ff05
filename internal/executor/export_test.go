package executor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/document"
)

// StoreAlone stores a rejected receipt for each of msgs (deliveries taken
// from the consumer) the way a failed batch's fallback does, and returns
// once every delivery is acked or given back.
func (e *Executor) StoreAlone(msgs []jetstream.Msg) {
	var wg sync.WaitGroup
	batch := make([]*pending, 0, len(msgs))
	for _, msg := range msgs {
		meta, err := msg.Metadata()
		if err != nil {
			panic(err)
		}
		wg.Add(1)
		d := &delivery{msg: msg, seq: meta.Sequence.Stream, delivered: meta.NumDelivered, attempt: nuid.Next(),
			id: document.Identify(msg.Data()), start: time.Now(), finished: wg.Done, ctx: context.Background()}
		r := e.receipt(d, document.OutcomeRejected)
		r.Rejection = &document.Rejection{Check: "envelope", Path: "$", Reason: "a test receipt"}
		p, err := e.pendingReceipt(d, r, true)
		if err != nil {
			panic(err)
		}
		batch = append(batch, p)
	}
	e.receipts.storeAlone(batch)
	wg.Wait()
}

// BatchMember is batchMember, for tests of the copy it makes.
var BatchMember = batchMember

// NoReceiptClockAllowance makes executors started afterwards in this test
// look for a message's receipts only among those stored after it (one
// server stamps both streams by one clock), until the test ends.
func NoReceiptClockAllowance(t testing.TB) {
	was := receiptClockAllowance
	receiptClockAllowance = 0
	t.Cleanup(func() { receiptClockAllowance = was })
}
