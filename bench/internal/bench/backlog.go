package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// drainResult is one backlog drain.
type drainResult struct {
	preload   int
	executors int
	n         int // approvals
	envelope  int // bytes of a typical envelope
	took      time.Duration
	check     *checkResult
	// CPU time used during the drain by this process (server, executors)
	// and by the service process (0 when it runs in this process).
	cpu, serviceCPU time.Duration
	// Receipt batches stored as atomic batches, and the receipts in them.
	batches, batched int64
}

func (d *drainResult) rate() float64 {
	if d.took <= 0 {
		return 0
	}
	return float64(d.n) / d.took.Seconds()
}

// drain stores a fresh backlog of Approvals, starts k executors and times
// them until every message is acked (so every receipt stored), then checks
// the outcome.
func (s *stack) drain(ctx context.Context, k int, prefix string, st *stages) (*drainResult, error) {
	o := s.o
	label := fmt.Sprintf("(%d stored intents, %d executor(s))", s.preload, k)
	end := st.begin("generate " + fmt.Sprint(o.Approvals) + " approvals " + label)
	w, err := generate(workloadSpec{N: o.Approvals, Resend: o.Resend, Conflict: o.Conflict, Payload: o.Payload,
		Prefix: prefix, Key: o.key, Now: time.Now(), ApprovalTimeout: 24 * time.Hour, Seed: uint64(len(prefix))})
	if err != nil {
		return nil, err
	}
	end()
	return s.drainWorkload(ctx, k, w, label, st)
}

func (s *stack) drainWorkload(ctx context.Context, k int, w *Workload, label string, st *stages) (*drainResult, error) {
	o := s.o
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	retriedBefore := s.retried.Load()
	before, err := s.counts(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the service's counters: %w", err)
	}
	if left, err := s.consumerLeft(ctx); err != nil {
		return nil, err
	} else if left > 0 {
		return nil, fmt.Errorf("bench: the executors' consumer has %d messages unfinished before the backlog is stored; drain them first", left)
	}
	fromReceipt, err := s.lastSeq(ctx, topology.ReceiptsStream)
	if err != nil {
		return nil, err
	}
	bar := newProgress(o.Status, o.Terminal)
	n := len(w.Envelopes)

	end := st.begin("store the backlog " + label)
	bar.begin("storing the backlog", n)
	seqs, err := storeAll(ctx, s.nc, topology.ApprovalsStream, w.Subjects, w.Envelopes, o.PublishBatch, bar.set)
	bar.end()
	if err != nil {
		return nil, err
	}
	end()

	end = st.begin("drain " + label)
	cpu0, svc0 := processCPU(), s.childCPU()
	start := time.Now()
	stop, err := s.executors(k)
	if err != nil {
		return nil, err
	}
	bar.begin(fmt.Sprintf("draining, %d executor(s)", k), n)
	for {
		left, err := s.consumerLeft(ctx)
		if err != nil {
			bar.end()
			stop()
			return nil, err
		}
		bar.set(n - min(left, n))
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	cpu, svcCPU := processCPU()-cpu0, s.childCPU()-svc0
	batches, batched := s.receiptBatches()
	bar.end()
	stop()
	end()

	// The report keeps the figures, not the workload.
	d := &drainResult{preload: s.preload, executors: k, n: len(w.Envelopes), envelope: w.EnvelopeBytes, took: took, cpu: cpu, serviceCPU: svcCPU, batches: batches, batched: batched}
	end = st.begin("check " + label)
	d.check, err = s.verify(ctx, w, seqs, fromReceipt+1, before, retriedBefore)
	end()
	return d, err
}
