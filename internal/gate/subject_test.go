package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/subjects"
)

func TestAnEnvelopeOnAnotherKeysSubjectIsRefusedAtEnvelope(t *testing.T) {
	s := seed(t)
	env := s.Original.Envelope()
	intent := "intent-0001"
	if _, err := gate.CheckDeliveryBindings(subjects.Approval("", intent), env); err != nil {
		t.Fatalf("on its own subject: %v", err)
	}
	if _, err := gate.CheckDeliveryBindings("", env); err != nil {
		t.Fatalf("without a subject: %v", err)
	}
	for _, subject := range []string{
		subjects.Approval("", intent+"-other"),
		subjects.Approval("team-b", intent),
		"approvals." + intent,
		"approvals." + subjects.Unknown,
		"approvals.x.y",
	} {
		_, err := gate.CheckDeliveryBindings(subject, env)
		var ge *gate.Error
		if !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || ge.Path != "$.request.intent_id" || !errors.Is(err, gate.ErrEnvelope) {
			t.Fatalf("on %s: %v, want a refusal at envelope, $.request.intent_id", subject, err)
		}
		if !strings.Contains(ge.Reason, subject) || !strings.Contains(ge.Reason, subjects.Approval("", intent)) {
			t.Errorf("the reason does not name both subjects: %s", ge.Reason)
		}
	}
}

func TestAScopedEnvelopeCountsOnlyOnItsOwnScopesSubject(t *testing.T) {
	s := seed(t)
	a, err := s.InScope(s.Original, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	env, intent := a.Envelope(), "intent-0001"
	t.Run("on its own scope's subject it passes", func(t *testing.T) {
		if _, err := gate.CheckDeliveryBindings(subjects.Approval("team-a", intent), env); err != nil {
			t.Fatalf("on %s: %v", subjects.Approval("team-a", intent), err)
		}
	})
	for _, subject := range []string{subjects.Approval("", intent), subjects.Approval("team-b", intent)} {
		t.Run("on "+subject+" it is refused at envelope", func(t *testing.T) {
			_, err := gate.CheckDeliveryBindings(subject, env)
			var ge *gate.Error
			if !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || !strings.Contains(ge.Reason, `scope "team-a"`) {
				t.Fatalf("on %s: %v, want a refusal at envelope that names the scope", subject, err)
			}
		})
	}
}
