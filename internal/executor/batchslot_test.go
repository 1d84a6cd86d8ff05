package executor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// With one receipt batch in flight, a batch's slot is free again once the
// stream has acknowledged its commit: while the first message of a stored
// batch is held before its ack, the receipts of further approvals are
// stored. The held batch's messages are acked only after that, and every
// message finishes with its receipt.
func TestTheNextReceiptBatchIsStoredWhileTheLastOneIsAcked(t *testing.T) {
	env := testenv.Start(t)
	var (
		mu       sync.Mutex
		batchOf  uint64 // stream sequence of the first receipt of the first batch
		held     bool
		holding  = make(chan struct{})
		another  = make(chan struct{})
		proceed  = make(chan struct{})
		released sync.Once
	)
	release := func() { released.Do(func() { close(proceed) }) }
	env.Executor(executor.Config{ID: "exec-1", ReceiptBatchesInFlight: 1,
		Fault: func(p executor.Point, seq, _ uint64, _ string) {
			mu.Lock()
			switch {
			case p == executor.BatchStaged && batchOf == 0:
				batchOf = seq
			case p == executor.BeforeAck && seq == batchOf && !held:
				held = true
				close(holding)
				mu.Unlock()
				select {
				case <-proceed:
				case <-time.After(30 * time.Second):
				}
				return
			case p == executor.AfterReceipt && held && seq != batchOf:
				// The held batch's other messages wait behind its first:
				// this receipt was stored by another batch.
				select {
				case <-another:
				default:
					close(another)
				}
			}
			mu.Unlock()
		}})
	// Registered after the executor's own cleanup, so run before it: a
	// failed test lets the held ack go before the executor drains.
	t.Cleanup(release)
	first := publishApprovals(t, env.JS, "slot-first", 60)
	waitClosed(t, holding, "no receipt batch was ever stored")
	more := publishApprovals(t, env.JS, "slot-more", 10)
	select {
	case <-another:
	case <-time.After(10 * time.Second):
		t.Fatal("no further receipt was stored while a stored batch's messages were being acked: the batch kept its slot")
	}
	release()
	in := waitForReceipts(t, env, append(first, more...), 60*time.Second)
	if in.Counts.CreatesExecuted != 70 {
		t.Fatalf("counters %+v, want 70 creates", in.Counts)
	}
}
