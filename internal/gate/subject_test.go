package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestAnEnvelopeOnAnotherIntentsSubjectIsRefusedAtEnvelope(t *testing.T) {
	s := seed(t)
	env := s.Original.Envelope()
	intent := "intent-0001"
	if _, err := gate.CheckDeliveryBindings(topology.ApprovalSubject(intent), env); err != nil {
		t.Fatalf("on its own subject: %v", err)
	}
	if _, err := gate.CheckDeliveryBindings("", env); err != nil {
		t.Fatalf("without a subject: %v", err)
	}
	for _, subject := range []string{topology.ApprovalSubject(intent + "-other"), "approvals." + topology.Unknown, "approvals.x.y"} {
		_, err := gate.CheckDeliveryBindings(subject, env)
		var ge *gate.Error
		if !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || ge.Path != "$.request.intent_id" || !errors.Is(err, gate.ErrEnvelope) {
			t.Fatalf("on %s: %v, want a refusal at envelope, $.request.intent_id", subject, err)
		}
		if !strings.Contains(ge.Reason, subject) || !strings.Contains(ge.Reason, topology.ApprovalSubject(intent)) {
			t.Errorf("the reason does not name both subjects: %s", ge.Reason)
		}
	}
}
