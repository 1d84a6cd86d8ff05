package executor_test

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// "café" in NFC and in NFD, each approved as written: the first is created,
// the second is rejected at the gate naming request.intent_id and never
// reaches the service. One intent, one task.
func TestAnIntentIDSpelledTwiceInUnicodeMakesOneTask(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	var rcs []*document.Receipt
	for _, intent := range []string{"caf\u00e9", "cafe\u0301"} {
		a, err := scenario.ApproveAsWritten(scenario.Candidate(), "task-request-cafe", intent, "補上通知設定的檢查項目", "approval-cafe")
		if err != nil {
			t.Fatal(err)
		}
		rcs = append(rcs, send(t, env, a.Envelope()))
	}
	if rcs[0].Outcome != document.OutcomeCreated {
		t.Fatalf("the NFC spelling: %s, want created", rcs[0].Outcome)
	}
	rj := rcs[1].Rejection
	if rcs[1].Outcome != document.OutcomeRejected || rj == nil || rj.Check != gate.CheckEnvelope ||
		rj.Path != "$.request.intent_id" || !strings.Contains(rj.Reason, "NFC") {
		t.Fatalf("the NFD spelling: %s %+v, want rejected at envelope, $.request.intent_id, saying NFC", rcs[1].Outcome, rj)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
}
