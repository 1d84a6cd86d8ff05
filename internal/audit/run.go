package audit

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file checks one run of work in a window of the streams: the approval
// messages a caller stored (named by their APPROVALS sequences), the
// receipts stored for them from a known RECEIPTS sequence on, and the task
// service's counters before and after. It is how a load run says, at its
// end, that nothing was lost and nothing done twice, without reading the
// whole history that Verify reads.

// RunInput is what one run of work left behind.
type RunInput struct {
	// Seqs are the approval messages the run stored.
	Seqs []uint64
	// Receipts are the receipts stored for them, by approval sequence.
	Receipts map[uint64][]*document.Receipt
	// Undecodable lists the receipts read that do not decode.
	Undecodable []Undecodable
	// Before and After are the task service's counters around the run.
	Before, After provider.Counts
	// Distinct is how many keys (scope, intent id), new to the service,
	// the run's messages carry: each must be created once.
	Distinct int
	// Retried is how many deliveries the executors gave back to be retried
	// after a failed call (a timeout, a transient error). A call that
	// created its task but whose answer never arrived is one of them: its
	// intent's receipts then say replayed, none created. So up to Retried
	// intents may lack a created receipt, provided a receipt names their
	// task; with Retried 0 every intent needs one.
	Retried int
}

// RunReport is the verdict on a run, with its figures.
type RunReport struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
	// Messages are the run's messages; WithReceipt those with a terminal
	// receipt; Receipts the receipts read for them, by outcome in Outcomes.
	Messages    int            `json:"messages"`
	WithReceipt int            `json:"with_receipt"`
	Receipts    int            `json:"receipts"`
	Outcomes    map[string]int `json:"outcomes"`
	// Delta is how much the service's counters grew during the run.
	Delta    provider.Counts `json:"delta"`
	Distinct int             `json:"distinct"`
	// AnswerLost counts the intents with receipts that name a task but none
	// that says created: their create's answer was lost (see
	// RunInput.Retried).
	AnswerLost int `json:"answer_lost"`
}

// Problems lists the violations of every check, in order.
func (r RunReport) Problems() []string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Violations...)
	}
	return out
}

// ReadRunReceipts reads the receipts stored on the RECEIPTS stream from
// sequence from on (up to its last sequence as of the call) and keeps those
// for the approval messages seqs, grouped by approval sequence.
func ReadRunReceipts(ctx context.Context, js jetstream.JetStream, from uint64, seqs []uint64) (map[uint64][]*document.Receipt, []Undecodable, error) {
	ours := make(map[uint64]bool, len(seqs))
	for _, seq := range seqs {
		ours[seq] = true
	}
	out := map[uint64][]*document.Receipt{}
	var bad []Undecodable
	s, err := js.Stream(ctx, topology.ReceiptsStream)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: opening stream %s: %w", topology.ReceiptsStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: reading stream %s: %w", topology.ReceiptsStream, err)
	}
	if info.State.LastSeq < from {
		return out, nil, nil
	}
	err = storedmsg.ReadFrom(ctx, js, s, info.State, false, from, func(m jetstream.Msg) error {
		r, u, ok := decodeStored(m)
		switch {
		case !ok:
			if ours[u.StreamSeq] {
				bad = append(bad, u)
			}
		case ours[r.Delivery.StreamSeq]:
			out[r.Delivery.StreamSeq] = append(out[r.Delivery.StreamSeq], r)
		}
		return nil
	})
	return out, bad, err
}

// VerifyRun checks a run: every message has a terminal receipt; none was
// rejected or dead-lettered; every receipt decodes; each intent has one
// created receipt, all receipts of an intent name one task, and as many
// intents were created as the run carries new; the service's creates
// executed and tasks existing grew by exactly that many, and its requests
// received by at least one per message.
func VerifyRun(in *RunInput) RunReport {
	rep := RunReport{OK: true, Messages: len(in.Seqs), Outcomes: map[string]int{}, Distinct: in.Distinct,
		Delta: provider.Counts{
			RequestsReceived: in.After.RequestsReceived - in.Before.RequestsReceived,
			CreatesExecuted:  in.After.CreatesExecuted - in.Before.CreatesExecuted,
			TasksExisting:    in.After.TasksExisting - in.Before.TasksExisting,
		}}
	for _, seq := range in.Seqs {
		terminal := false
		for _, r := range in.Receipts[seq] {
			rep.Receipts++
			rep.Outcomes[r.Outcome]++
			terminal = terminal || r.Of(seq)
		}
		if terminal {
			rep.WithReceipt++
		}
	}
	r := &runView{in: in, delta: rep.Delta}
	rep.Checks = makeChecks(runChecks, func(rl rule, c *Check) { rl.run(c, r) })
	rep.AnswerLost = r.answerLost
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.OK
	}
	return rep
}

// runView is one run as its checks see it.
type runView struct {
	in *RunInput
	// delta is how much the service's counters grew during the run.
	delta provider.Counts
	// answerLost is set by checkRunCreates (RunReport.AnswerLost).
	answerLost int
}

// checkRunTerminal makes one-terminal-outcome on a run's messages.
func checkRunTerminal(c *Check, run *runView) {
	messages := make(map[uint64]document.Identity, len(run.in.Seqs))
	for _, seq := range run.in.Seqs {
		messages[seq] = document.Identity{}
	}
	checkTerminal(c, &Input{Messages: messages, Receipts: run.in.Receipts})
}

// checkRunNotRefused: no message of the run was rejected or dead-lettered,
// and every receipt read decodes.
func checkRunNotRefused(c *Check, run *runView) {
	in := run.in
	refused := 0
	for _, seq := range in.Seqs {
		for _, r := range in.Receipts[seq] {
			if r.Outcome == document.OutcomeRejected || r.Outcome == document.OutcomeDeadLettered {
				refused++
				c.violate("message %d: %s", seq, r.Outcome)
			}
		}
	}
	for _, u := range in.Undecodable {
		c.violate("the receipt at %d (for message %d) does not decode: %s", u.Seq, u.StreamSeq, u.Err)
	}
	c.fig("rejected or dead-lettered receipts", refused)
	c.fig("undecodable receipts", len(in.Undecodable))
}

// checkRunCreates: each intent of the run has exactly one created receipt
// (or, up to the calls retried, none, when its create's answer was lost),
// all of its receipts name one task, and the intents created are the new
// intents the run carries.
func checkRunCreates(c *Check, run *runView) {
	in := run.in
	var answerLost int
	created := map[key]int{}
	task := map[key]string{}
	for _, seq := range in.Seqs {
		for _, r := range in.Receipts[seq] {
			if !serviceOutcome(r.Outcome) {
				continue
			}
			if r.IntentID == nil || r.TaskID == nil {
				c.violate("message %d: a %s receipt without intent or task", seq, r.Outcome)
				continue
			}
			k := receiptKey(r)
			if r.Outcome == document.OutcomeCreated {
				created[k]++
			}
			if prev, ok := task[k]; ok && prev != *r.TaskID {
				c.violate("%s: receipts name tasks %s and %s", k, prev, *r.TaskID)
			}
			task[k] = *r.TaskID
		}
	}
	// A key whose receipts name a task but none says created: its
	// create's answer was lost, which only a retried call explains.
	for k := range task {
		if created[k] == 0 {
			answerLost++
		}
	}
	if answerLost > in.Retried {
		c.violate("%d keys have only replayed or conflict receipts, but the executors retried %d calls", answerLost, in.Retried)
	}
	if len(created)+min(answerLost, in.Retried) != in.Distinct {
		c.violate("%d keys have a created receipt; want %d", len(created), in.Distinct)
	}
	keys := make([]key, 0, len(created))
	for k := range created {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	doubled := 0
	for _, k := range keys {
		if n := created[k]; n > 1 {
			doubled++
			c.violate("%s has %d created receipts", k, n)
		}
	}
	c.fig("keys with a created receipt", len(created))
	c.fig("keys whose create's answer was lost (no created receipt; a retried call made it)", answerLost)
	c.fig("calls retried by the executors", in.Retried)
	c.fig("new keys in the run", in.Distinct)
	c.fig("keys with more than one created receipt", doubled)
	run.answerLost = answerLost
}

// checkRunCounters: creates executed and tasks existing grew by the new
// intents, requests received by at least the messages.
func checkRunCounters(c *Check, run *runView) {
	in, delta := run.in, run.delta
	if delta.CreatesExecuted != int64(in.Distinct) || delta.TasksExisting != int64(in.Distinct) {
		c.violate("creates executed grew by %d and tasks existing by %d for %d distinct intents", delta.CreatesExecuted, delta.TasksExisting, in.Distinct)
	}
	if delta.RequestsReceived < int64(len(in.Seqs)) {
		c.violate("requests received grew by %d for %d messages", delta.RequestsReceived, len(in.Seqs))
	}
	c.fig("requests received", int(delta.RequestsReceived))
	c.fig("creates executed", int(delta.CreatesExecuted))
	c.fig("tasks existing", int(delta.TasksExisting))
}

// decodeStored decodes a stored receipt; when it does not decode, it says
// which, and for which approval message its header names.
func decodeStored(m jetstream.Msg) (*document.Receipt, Undecodable, bool) {
	meta, err := m.Metadata()
	if err != nil {
		return nil, Undecodable{Err: err.Error()}, false
	}
	r, err := document.DecodeReceipt(m.Data())
	if err != nil {
		seq, _ := strconv.ParseUint(m.Headers().Get(topology.HeaderStreamSeq), 10, 64)
		why := err.Error()
		if st := statusMessage(m); st != "" {
			why = st
		}
		return nil, Undecodable{Seq: meta.Sequence.Stream, StreamSeq: seq, Err: why}, false
	}
	return r, Undecodable{}, true
}
