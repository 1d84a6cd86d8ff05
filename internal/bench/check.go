package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// checkResult is the end-of-run check: nothing lost, nothing doubled.
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

func (c *checkResult) fail(format string, args ...any) {
	if len(c.problems) < 10 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	} else if len(c.problems) == 10 {
		c.problems = append(c.problems, "…")
	}
}

// verify reads the receipts stored since fromReceipt and the service's
// counters, and checks the workload's messages (at seqs) against them:
// every message has a terminal receipt; creates executed and tasks existing
// grew by exactly the workload's distinct intents; each intent has one
// created receipt, and all of its receipts name one task; nothing was
// rejected or dead-lettered; every message reached the service.
func (s *stack) verify(ctx context.Context, w *Workload, seqs []uint64, fromReceipt uint64, before provider.Counts) (*checkResult, error) {
	c := &checkResult{messages: len(seqs), outcomes: map[string]int{}, distinct: w.Distinct}
	after, err := s.svc.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the service's counters: %w", err)
	}
	c.delta = countsDelta(before, after)
	want := make(map[uint64]bool, len(seqs))
	for _, seq := range seqs {
		want[seq] = false
	}
	last, err := s.lastSeq(ctx, topology.ReceiptsStream)
	if err != nil {
		return nil, err
	}
	created := map[string]int{}
	task := map[string]string{}
	if last >= fromReceipt {
		cons, err := s.js.OrderedConsumer(ctx, topology.ReceiptsStream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   fromReceipt,
		})
		if err != nil {
			return nil, err
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1000))
		if err != nil {
			return nil, err
		}
		defer it.Stop()
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		var r struct {
			IntentID *string `json:"intent_id"`
			TaskID   *string `json:"task_id"`
		}
		for {
			m, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("bench: reading receipts: %w", err)
			}
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			seq, _ := strconv.ParseUint(m.Headers().Get(topology.HeaderStreamSeq), 10, 64)
			outcome := m.Headers().Get(topology.HeaderOutcome)
			if done, ours := want[seq]; ours {
				c.receipts++
				c.outcomes[outcome]++
				if !done && document.Terminal(outcome) {
					want[seq] = true
					c.withReceipt++
				}
				r.IntentID, r.TaskID = nil, nil
				if err := json.Unmarshal(m.Data(), &r); err != nil {
					c.fail("the receipt at %d does not decode: %v", meta.Sequence.Stream, err)
				}
				switch outcome {
				case document.OutcomeRejected, document.OutcomeDeadLettered:
					c.fail("message %d: %s", seq, outcome)
				case document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict:
					if r.IntentID == nil || r.TaskID == nil {
						c.fail("message %d: a %s receipt without intent or task", seq, outcome)
						break
					}
					if outcome == document.OutcomeCreated {
						created[*r.IntentID]++
					}
					if prev, ok := task[*r.IntentID]; ok && prev != *r.TaskID {
						c.fail("intent %s: receipts name tasks %s and %s", *r.IntentID, prev, *r.TaskID)
					}
					task[*r.IntentID] = *r.TaskID
				}
			}
			if meta.Sequence.Stream >= last {
				break
			}
		}
	}
	if c.withReceipt != len(seqs) {
		missing := 0
		for seq, done := range want {
			if !done {
				missing++
				if missing <= 3 {
					c.fail("message %d has no terminal receipt", seq)
				}
			}
		}
		c.fail("%d of %d messages have no terminal receipt", missing, len(seqs))
	}
	if c.delta.CreatesExecuted != int64(w.Distinct) || c.delta.TasksExisting != int64(w.Distinct) {
		c.fail("creates executed grew by %d and tasks existing by %d for %d distinct intents", c.delta.CreatesExecuted, c.delta.TasksExisting, w.Distinct)
	}
	if len(created) != w.Distinct {
		c.fail("%d intents have a created receipt; want %d", len(created), w.Distinct)
	}
	for intent, n := range created {
		if n > 1 {
			c.fail("intent %s has %d created receipts", intent, n)
		}
	}
	if c.delta.RequestsReceived < int64(len(seqs)) {
		c.fail("requests received grew by %d for %d messages", c.delta.RequestsReceived, len(seqs))
	}
	return c, nil
}
