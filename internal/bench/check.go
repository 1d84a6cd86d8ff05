package bench

import (
	"context"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// checkResult is the end-of-run check: nothing lost, nothing doubled (the
// audit's checks of a run, see audit.VerifyRun).
type checkResult struct {
	messages    int
	withReceipt int
	receipts    int
	outcomes    map[string]int
	delta       provider.Counts
	distinct    int
	problems    []string
}

func (c *checkResult) ok() bool { return len(c.problems) == 0 }

// maxProblems bounds the problems a check lists.
const maxProblems = 10

// verify reads the receipts stored since fromReceipt for the workload's
// messages (at seqs) and the service's counters, and checks them with the
// audit's checks of a run (see audit.VerifyRun): every message has a
// terminal receipt; nothing was rejected or dead-lettered; each intent has
// one created receipt, and all of its receipts name one task; creates
// executed and tasks existing grew by exactly the workload's distinct
// intents; every message reached the service.
func (s *stack) verify(ctx context.Context, w *Workload, seqs []uint64, fromReceipt uint64, before provider.Counts) (*checkResult, error) {
	after, err := s.svc.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the service's counters: %w", err)
	}
	receipts, undecodable, err := audit.ReadRunReceipts(ctx, s.js, fromReceipt, seqs)
	if err != nil {
		return nil, fmt.Errorf("bench: reading receipts: %w", err)
	}
	rep := audit.VerifyRun(&audit.RunInput{Seqs: seqs, Receipts: receipts, Undecodable: undecodable,
		Before: before, After: after, Distinct: w.Distinct})
	c := &checkResult{messages: rep.Messages, withReceipt: rep.WithReceipt, receipts: rep.Receipts,
		outcomes: rep.Outcomes, delta: rep.Delta, distinct: rep.Distinct}
	for _, p := range rep.Problems() {
		if len(c.problems) == maxProblems {
			c.problems = append(c.problems, "…")
			break
		}
		c.problems = append(c.problems, p)
	}
	return c, nil
}
