package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// runReceipt is a receipt for approval message seq.
func runReceipt(seq uint64, outcome, intent, task string) *document.Receipt {
	r := &document.Receipt{SchemaVersion: document.ReceiptVersion, ReceiptID: fmt.Sprintf("receipt-%d-%s", seq, outcome), Outcome: outcome,
		IntentID: ptr(intent), RequestID: ptr("task-request-" + intent), ApprovalID: ptr("approval-" + intent),
		Delivery: document.Delivery{StreamSeq: seq, Delivered: 1, Attempt: "a" + strconv.FormatUint(seq, 10), Executor: "exec-1"},
		IssuedAt: stamp(auditedAt)}
	if task != "" {
		r.TaskID = ptr(task)
	}
	return r
}

// healthyRun is a run as the pipeline leaves it: four messages, intent a
// created and then replayed, b created, a changed request under b a
// conflict; the service saw four requests and created two tasks.
func healthyRun() *audit.RunInput {
	return &audit.RunInput{
		Seqs: []uint64{11, 12, 13, 14},
		Receipts: map[uint64][]*document.Receipt{
			11: {runReceipt(11, document.OutcomeCreated, "intent-a", "fake-task-0001")},
			12: {runReceipt(12, document.OutcomeReplayed, "intent-a", "fake-task-0001")},
			13: {runReceipt(13, document.OutcomeCreated, "intent-b", "fake-task-0002")},
			14: {runReceipt(14, document.OutcomeConflict, "intent-b", "fake-task-0002")},
		},
		Before:   provider.Counts{RequestsReceived: 100, CreatesExecuted: 50, TasksExisting: 50},
		After:    provider.Counts{RequestsReceived: 104, CreatesExecuted: 52, TasksExisting: 52},
		Distinct: 2,
	}
}

func TestVerifyRunPassesAHealthyRunAndCountsItsReceipts(t *testing.T) {
	rep := audit.VerifyRun(healthyRun())
	if !rep.OK {
		t.Fatalf("a healthy run fails: %v", rep.Problems())
	}
	if rep.Messages != 4 || rep.WithReceipt != 4 || rep.Receipts != 4 || rep.Delta.CreatesExecuted != 2 || rep.Delta.RequestsReceived != 4 {
		t.Errorf("figures: %+v", rep)
	}
	if rep.Outcomes[document.OutcomeCreated] != 2 || rep.Outcomes[document.OutcomeReplayed] != 1 || rep.Outcomes[document.OutcomeConflict] != 1 {
		t.Errorf("outcomes: %v", rep.Outcomes)
	}
}

// Two scopes that use one intent id are two keys: one created receipt
// each, naming a task each, is no double create.
func TestVerifyRunCountsOneIntentIdInTwoScopesAsTwoKeys(t *testing.T) {
	in := healthyRun()
	in.Seqs = append(in.Seqs, 15)
	other := runReceipt(15, document.OutcomeCreated, "intent-a", "fake-task-0003")
	other.Scope = "team-b"
	in.Receipts[15] = []*document.Receipt{other}
	in.Distinct = 3
	in.After.RequestsReceived++
	in.After.CreatesExecuted++
	in.After.TasksExisting++
	if rep := audit.VerifyRun(in); !rep.OK {
		t.Fatalf("the run fails: %v", rep.Problems())
	}
}

// A create whose answer was lost leaves its intent with replayed receipts
// only; the run passes when the executors retried a call for it.
func TestVerifyRunAcceptsACreateWhoseAnswerWasLostWhenACallWasRetried(t *testing.T) {
	in := healthyRun()
	in.Retried = 1
	in.Receipts[11] = []*document.Receipt{runReceipt(11, document.OutcomeReplayed, "intent-a", "fake-task-0001")}
	rep := audit.VerifyRun(in)
	if !rep.OK {
		t.Fatalf("the run fails: %v", rep.Problems())
	}
	if rep.AnswerLost != 1 {
		t.Errorf("AnswerLost %d, want 1", rep.AnswerLost)
	}
}

// Each case breaks a healthy run in one way; the check that owns that rule
// fails and says why.
func TestVerifyRunFailsWhenTheRunIsBroken(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(in *audit.RunInput)
		check   string
		says    string
	}{
		{"a message without a receipt", func(in *audit.RunInput) { delete(in.Receipts, 12) },
			"one-terminal-outcome", "message 12"},
		{"a message dead-lettered", func(in *audit.RunInput) {
			in.Receipts[12] = []*document.Receipt{runReceipt(12, document.OutcomeDeadLettered, "intent-a", "")}
		}, "run-not-refused", "message 12: dead_lettered"},
		{"a message rejected", func(in *audit.RunInput) {
			in.Receipts[14] = []*document.Receipt{runReceipt(14, document.OutcomeRejected, "intent-b", "")}
		}, "run-not-refused", "message 14: rejected"},
		{"a receipt that does not decode", func(in *audit.RunInput) {
			in.Undecodable = []audit.Undecodable{{Seq: 7, StreamSeq: 13, Err: "broken"}}
		}, "run-not-refused", "the receipt at 7 (for message 13) does not decode"},
		{"an intent created twice", func(in *audit.RunInput) {
			in.Receipts[12] = []*document.Receipt{runReceipt(12, document.OutcomeCreated, "intent-a", "fake-task-0001")}
		}, "run-one-create-per-key", `intent "intent-a" in scope "default" has 2 created receipts`},
		{"the receipts of an intent naming two tasks", func(in *audit.RunInput) {
			in.Receipts[12] = []*document.Receipt{runReceipt(12, document.OutcomeReplayed, "intent-a", "fake-task-0009")}
		}, "run-one-create-per-key", `intent "intent-a" in scope "default": receipts name tasks fake-task-0001 and fake-task-0009`},
		{"an intent never created", func(in *audit.RunInput) { in.Distinct = 3 },
			"run-one-create-per-key", "2 keys have a created receipt; want 3"},
		{"an intent without a created receipt, and no call retried", func(in *audit.RunInput) {
			in.Receipts[11] = []*document.Receipt{runReceipt(11, document.OutcomeReplayed, "intent-a", "fake-task-0001")}
		}, "run-one-create-per-key", "1 keys have only replayed or conflict receipts, but the executors retried 0 calls"},
		{"two intents without a created receipt, and one call retried", func(in *audit.RunInput) {
			in.Retried = 1
			in.Receipts[11] = []*document.Receipt{runReceipt(11, document.OutcomeReplayed, "intent-a", "fake-task-0001")}
			in.Receipts[13] = []*document.Receipt{runReceipt(13, document.OutcomeReplayed, "intent-b", "fake-task-0002")}
		}, "run-one-create-per-key", "2 keys have only replayed or conflict receipts, but the executors retried 1 calls"},
		{"one create more than the intents", func(in *audit.RunInput) { in.After.CreatesExecuted++ },
			"run-counters", "creates executed grew by 3 and tasks existing by 2 for 2 distinct intents"},
		{"fewer requests than messages", func(in *audit.RunInput) { in.After.RequestsReceived = 103 },
			"run-counters", "requests received grew by 3 for 4 messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := healthyRun()
			tc.breakIt(in)
			rep := audit.VerifyRun(in)
			if rep.OK {
				t.Fatal("the broken run passes")
			}
			if got := failing(rep.Checks); len(got) == 0 || got[0] != tc.check {
				t.Errorf("failing checks %v; want %s first", got, tc.check)
			}
			if p := strings.Join(rep.Problems(), "\n"); !strings.Contains(p, tc.says) {
				t.Errorf("the problems do not say %q:\n%s", tc.says, p)
			}
		})
	}
}

// ReadRunReceipts reads a real RECEIPTS stream from the sequence given and
// keeps only the receipts of the run's messages.
func TestReadRunReceiptsKeepsTheRunsReceiptsFromTheSequenceGiven(t *testing.T) {
	js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := topology.Ensure(ctx, js, topology.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	store := func(seq uint64, body []byte) uint64 {
		t.Helper()
		m := nats.NewMsg(subjects.Receipt("", "intent-"+strconv.FormatUint(seq, 10)))
		m.Data = body
		m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(seq, 10))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	receipt := func(seq uint64) []byte {
		b, err := json.Marshal(runReceipt(seq, document.OutcomeCreated, "intent-"+strconv.FormatUint(seq, 10), "fake-task-1"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	store(21, receipt(21)) // before the run
	from := store(22, receipt(22))
	store(99, receipt(99)) // another run's
	store(23, receipt(23))
	bad := store(23, []byte(`{"schema_version":"task-receipt.v1"}`))
	store(98, []byte(`not json`)) // another run's, undecodable

	got, undecodable, err := audit.ReadRunReceipts(ctx, js, from, []uint64{21, 22, 23})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[22]) != 1 || len(got[23]) != 1 {
		t.Errorf("receipts by message: %v; want one for 22 and one for 23", got)
	}
	if len(undecodable) != 1 || undecodable[0].Seq != bad || undecodable[0].StreamSeq != 23 {
		t.Errorf("undecodable: %+v; want the one at %d for message 23", undecodable, bad)
	}
}
