package gate_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/subjects"
)

// scopedMessage is the seed's first request, naming scope (none when ""),
// approved at scenario.ApprovedAt for scenario.SignedLifetime: signed by key
// when there is one, else unsigned.
func scopedMessage(t testing.TB, scope string, key *sign.Key) scenario.Approved {
	t.Helper()
	opts := approve.Options{ID: "approval-0001"}
	if key != nil {
		opts.Key, opts.Lifetime = key, scenario.SignedLifetime
	}
	m, err := scenario.ApproveInScope(scenario.Candidate(), scope, "task-request-0001", "intent-0001", scenario.Title, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scopedChecker trusts the test key, granting it scopes (none: the
// member absent), with its clock an hour after the approvals were made.
func scopedChecker(t testing.TB, scopes ...string) *gate.Checker {
	t.Helper()
	a := sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public())
	a.Scopes = scopes
	kr, err := sign.NewKeyring(a)
	if err != nil {
		t.Fatal(err)
	}
	return &gate.Checker{Keys: kr, Now: func() time.Time { return scenario.ApprovedAt.Add(time.Hour) }}
}

func TestASignedApprovalPassesOnlyForAScopeItsApproverIsTrustedFor(t *testing.T) {
	key := scenario.TestKey()
	for _, c := range []struct {
		name    string
		granted []string // the approver's scopes in the trusted file; nil: none named
		scope   string   // the request's scope; "": none named
		pass    bool
		says    string // in the refusal's reason: what the approver may approve
	}{
		{"a request naming no scope passes for an approver whose entry names none", nil, "", true, ""},
		{"a request naming the default scope passes for an approver whose entry names none", nil, "default", true, ""},
		{"a request for team-a is refused for an approver whose entry names no scope", nil, "team-a", false, `"default"`},
		{"a request for team-a passes for an approver trusted for team-a", []string{"team-a"}, "team-a", true, ""},
		{"a request for team-b is refused for an approver trusted for team-a only", []string{"team-a"}, "team-b", false, `"team-a"`},
		{"a request naming no scope is refused for an approver trusted for team-a only", []string{"team-a"}, "", false, `"team-a"`},
		{"a request for team-b passes for an approver trusted for team-a and team-b", []string{"team-a", "team-b"}, "team-b", true, ""},
		{"a request for any scope passes for an approver trusted for *", []string{"*"}, "tenant-42", true, ""},
		{"a request naming no scope passes for an approver trusted for *", []string{"*"}, "", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := scopedMessage(t, c.scope, key)
			v, err := scopedChecker(t, c.granted...).Check(m.Envelope())
			if c.pass {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want := c.scope
				if want == "" {
					want = "default"
				}
				if v.Request.KeyScope() != want {
					t.Errorf("the verdict's key scope is %q, want %q", v.Request.KeyScope(), want)
				}
				return
			}
			wantCheck(t, v, err, gate.CheckScope)
			var ge *gate.Error
			errors.As(err, &ge)
			if !errors.Is(err, gate.ErrScope) {
				t.Errorf("the refusal does not unwrap to gate.ErrScope: %v", err)
			}
			if ge.Path != "$.request.scope" {
				t.Errorf("path %q, want $.request.scope", ge.Path)
			}
			scope := c.scope
			if scope == "" {
				scope = "default"
			}
			for _, s := range []string{`"` + scope + `"`, `"` + scenario.Reviewer + `"`, c.says} {
				if !strings.Contains(ge.Reason, s) {
					t.Errorf("the reason does not name %s: %s", s, ge.Reason)
				}
			}
		})
	}
}

func TestTheScopeCheckComesAfterTheOthersAndOnlyForSignedApprovals(t *testing.T) {
	key := scenario.TestKey()
	t.Run("scope is the last check, after capability and destination", func(t *testing.T) {
		n := len(gate.Checks)
		if gate.Checks[n-1] != gate.CheckScope || gate.Checks[n-2] != gate.CheckDestination || gate.Checks[n-3] != gate.CheckCapability {
			t.Fatalf("checks %q: want capability, destination, scope last", gate.Checks)
		}
	})
	t.Run("an unsigned approval for team-a passes an insecure checker: no signer, no scopes to look up", func(t *testing.T) {
		c := scopedChecker(t)
		c.AllowUnsigned = true
		v, err := c.Check(scopedMessage(t, "team-a", nil).Envelope())
		if err != nil {
			t.Fatal(err)
		}
		if v.SignedBy != "" || !v.NotAfter.IsZero() {
			t.Errorf("an unsigned verdict names signer %q and expiry %v", v.SignedBy, v.NotAfter)
		}
	})
	t.Run("the checks that need no keys pass a signed approval for a scope nobody is trusted for", func(t *testing.T) {
		if _, err := gate.CheckBindings(scopedMessage(t, "team-a", key).Envelope()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a scope changed after the approval stops at request_binding: the digest binds it", func(t *testing.T) {
		m := scopedMessage(t, "team-a", key)
		m.Request = scenario.Edit(m.Request, func(mm map[string]any) { mm["scope"] = "team-b" })
		v, err := scopedChecker(t, "team-a", "team-b").Check(m.Envelope())
		wantCheck(t, v, err, gate.CheckRequestBinding)
	})
	t.Run("a scope removed after the approval stops at request_binding", func(t *testing.T) {
		m := scopedMessage(t, "team-a", key)
		m.Request = scenario.Edit(m.Request, func(mm map[string]any) { delete(mm, "scope") })
		v, err := scopedChecker(t, "*").Check(m.Envelope())
		wantCheck(t, v, err, gate.CheckRequestBinding)
	})
	t.Run("a wrong capability for a scope the approver may not approve stops at capability first", func(t *testing.T) {
		m := scopedMessage(t, "team-a", key)
		m.Approval = scenario.Edit(m.Approval, func(mm map[string]any) { mm["capabilities"] = []any{"publish"} })
		// Re-sign so that only capability and scope are wrong.
		var err error
		if m.Approval, err = resign(m.Approval, key); err != nil {
			t.Fatal(err)
		}
		v, err := scopedChecker(t).Check(m.Envelope())
		wantCheck(t, v, err, gate.CheckCapability)
	})
}

func TestAVerdictCarriesTheApprovalsExpiry(t *testing.T) {
	m := scopedMessage(t, "", scenario.TestKey())
	v, err := scopedChecker(t).Check(m.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	if want := scenario.ApprovedAt.Add(scenario.SignedLifetime); !v.NotAfter.Equal(want) {
		t.Fatalf("NotAfter %v, want %v", v.NotAfter, want)
	}
}

func jsonMarshalDoc(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// resign signs an edited approval again with key, keeping its not_after.
func resign(approval []byte, key *sign.Key) ([]byte, error) {
	var a document.Approval
	if err := json.Unmarshal(approval, &a); err != nil {
		return nil, err
	}
	notAfter, err := time.Parse(time.RFC3339, a.NotAfter)
	if err != nil {
		return nil, err
	}
	if err := approve.Sign(&a, key, notAfter); err != nil {
		return nil, err
	}
	return jsonMarshalDoc(&a)
}

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
