package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// A delivery's receipt is filed under the scope its subject names, where
// the one who could publish on that subject may read it: never under a
// scope the request names but the subject does not, and under the unknown
// scope when the subject names none.
func TestAReceiptIsFiledUnderTheScopeOfItsDeliverySubject(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := seed(t)
	scoped, err := s.InScope(s.Original, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	const intent = "intent-0001"
	for _, tc := range []struct {
		name, subject string
		envelope      []byte
		scope         string // where the receipt is filed
		rejected      bool   // at envelope
	}{
		{"a request of team-a on team-a's subject is filed under team-a", subjects.Approval("team-a", intent), scoped.Envelope(), "team-a", false},
		{"a request of team-a on team-b's subject is refused and filed under team-b", subjects.Approval("team-b", intent), scoped.Envelope(), "team-b", true},
		{"a request of the default scope on team-b's subject is refused and filed under team-b", subjects.Approval("team-b", intent), s.Original.Envelope(), "team-b", true},
		{"a request on a subject that names no scope is refused and filed under the unknown scope", "approvals." + intent, s.Original.Envelope(), subjects.ScopeUnknown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			ack, err := env.JS.Publish(ctx, tc.subject, tc.envelope)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := testenv.WaitReceipt(ctx, env.JS, tc.scope, intent, ack.Sequence)
			if err != nil {
				t.Fatalf("no receipt on %s: %v", subjects.Receipt(tc.scope, intent), err)
			}
			refused := rc.Outcome == document.OutcomeRejected && rc.Rejection != nil && rc.Rejection.Check == gate.CheckEnvelope
			if refused != tc.rejected {
				t.Fatalf("receipt %s; want rejected at envelope: %v", rc.Raw, tc.rejected)
			}
		})
	}
}
