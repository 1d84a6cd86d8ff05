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
	batch, finished := e.testReceipts(msgs)
	e.receipts.storeAlone(batch)
	finished()
}

// StoreGroup stores a rejected receipt for each of msgs as the receipt
// batcher stores one group taken from its queue, and returns once every
// delivery is acked or given back.
func (e *Executor) StoreGroup(msgs []jetstream.Msg) error {
	if err := e.receipts.start(); err != nil {
		return err
	}
	defer e.receipts.stop()
	batch, finished := e.testReceipts(msgs)
	e.receipts.store(batch, func() {})
	finished()
	return nil
}

// testReceipts makes a rejected receipt for each of msgs, and a function
// that waits until every delivery is finished.
func (e *Executor) testReceipts(msgs []jetstream.Msg) ([]*pending, func()) {
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
	return batch, wg.Wait
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
