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
	// retried counts the calls the executors retried during the run, and
	// answerLost the intents whose create's answer was lost with one of
	// them (replayed receipts only).
	retried, answerLost int
	// dav: the task service was a CalDAV collection, whose tasks were
	// counted (delta.TasksExisting) instead of the fake service's counters.
	dav bool
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
//
// With a CalDAV collection as the task service, the counters are the
// collection's tasks only (see counts), and the check on them is that the
// tasks grew by exactly the distinct intents.
//
// retriedBefore is the executors' count of retried calls when the run
// started: a create whose answer was lost (a call timeout) leaves its intent
// with replayed receipts only, which the check accepts for as many intents
// as calls were retried during the run.
func (s *stack) verify(ctx context.Context, w *Workload, seqs []uint64, fromReceipt uint64, before provider.Counts, retriedBefore int64) (*checkResult, error) {
	after, err := s.counts(ctx)
	if err != nil {
		return nil, err
	}
	receipts, undecodable, err := audit.ReadRunReceipts(ctx, s.js, fromReceipt, seqs)
	if err != nil {
		return nil, fmt.Errorf("bench: reading receipts: %w", err)
	}
	retried := int(s.retried.Load() - retriedBefore)
	rep := audit.VerifyRun(&audit.RunInput{Seqs: seqs, Receipts: receipts, Undecodable: undecodable,
		Before: before, After: after, Distinct: w.Distinct, Retried: retried})
	c := &checkResult{messages: rep.Messages, withReceipt: rep.WithReceipt, receipts: rep.Receipts,
		outcomes: rep.Outcomes, delta: rep.Delta, distinct: rep.Distinct, dav: s.dav != nil,
		retried: retried, answerLost: rep.AnswerLost}
	problems := rep.Problems()
	if c.dav {
		problems = nil
		for _, ch := range rep.Checks {
			if ch.ID != audit.RunCountersCheck {
				problems = append(problems, ch.Violations...)
			}
		}
		if c.delta.TasksExisting != int64(w.Distinct) {
			problems = append(problems, fmt.Sprintf("the collection's tasks grew by %d for %d distinct intents", c.delta.TasksExisting, w.Distinct))
		}
	}
	for _, p := range problems {
		if len(c.problems) == maxProblems {
			c.problems = append(c.problems, "…")
			break
		}
		c.problems = append(c.problems, p)
	}
	return c, nil
}

// counts reads the task service's counters: the fake service's, or, with a
// CalDAV collection, the tasks in it as TasksExisting (a CalDAV server
// counts nothing else).
func (s *stack) counts(ctx context.Context) (provider.Counts, error) {
	if s.dav != nil {
		l, err := s.dav.Tasks(ctx)
		if err != nil {
			return provider.Counts{}, fmt.Errorf("bench: listing the CalDAV collection's tasks: %w", err)
		}
		return provider.Counts{TasksExisting: int64(len(l.Tasks))}, nil
	}
	c, err := s.svc.Stats(ctx)
	if err != nil {
		return c, fmt.Errorf("bench: reading the service's counters: %w", err)
	}
	return c, nil
}
