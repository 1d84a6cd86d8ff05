package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// reviewerKeyring trusts the scenario's reviewer with its test key, the key
// scenario.BuildSigned signs with.
func reviewerKeyring(t *testing.T) *sign.Keyring {
	t.Helper()
	kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public()))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func TestForgedOrExpiredApprovalsNeverReachTheService(t *testing.T) {
	env := testenv.Start(t)
	key := scenario.TestKey()
	kr := reviewerKeyring(t)
	// Approvals made an hour ago, valid for a day; one made 2 days ago is expired.
	now := time.Now().UTC().Truncate(time.Second)
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	s, err := scenario.BuildSigned(key, now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	old, err := scenario.BuildSigned(key, now.Add(-48*time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := scenario.BuildSigned(stranger, now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(a scenario.Approved, f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(a.Approval, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		a.Approval, _ = json.Marshal(m)
		return a.Envelope()
	}
	var origSig any
	{
		var m map[string]any
		_ = json.Unmarshal(s.Original.Approval, &m)
		origSig = m["signature"]
	}
	unsigned := testenv.Seed(t)
	for _, c := range []struct {
		name, check string
		envelope    []byte
	}{
		{"an approval signed by an unknown key", gate.CheckSignature, foreign.Original.Envelope()},
		{"a valid signature copied onto different content", gate.CheckSignature, edit(s.Changed, func(m map[string]any) { m["signature"] = origSig })},
		{"an approval edited after signing", gate.CheckSignature, edit(s.Original, func(m map[string]any) { m["approved_by"] = "mallory" })},
		{"an expired approval", gate.CheckExpiry, old.Original.Envelope()},
		{"an unsigned approval", gate.CheckSignature, unsigned.Original.Envelope()},
	} {
		t.Run(c.name+" is rejected at "+c.check, func(t *testing.T) {
			rc := send(t, env, c.envelope)
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != c.check {
				t.Fatalf("receipt %+v (%+v), want rejected at %s", rc.Outcome, rc.Rejection, c.check)
			}
		})
	}
	wantCounts(t, env.Counts(), 0, 0, 0)
	if rc := send(t, env, s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("a valid signed approval: %s, want created", rc.Outcome)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
}

func TestAnApprovalThatExpiresBetweenDeliveriesIsStillReplayed(t *testing.T) {
	env := testenv.Start(t)
	key := scenario.TestKey()
	kr := reviewerKeyring(t)
	// The first delivery's reply is dropped, and the call waits longer than
	// the approval has left: the redelivery comes after not_after. The
	// approval has 2 to 3 seconds left when it is sent; the executor judges
	// expiry at the time the stream stored the message.
	const callTimeout = 4 * time.Second
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}, CallTimeout: callTimeout})
	if _, err := env.Service.ArmFault(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	notAfter := time.Now().UTC().Truncate(time.Second).Add(3 * time.Second)
	s, err := scenario.BuildSigned(key, notAfter.Add(-time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rc := send(t, env, s.Original.Envelope())
	if rc.Outcome != document.OutcomeReplayed || rc.Delivery.Delivered < 2 {
		t.Fatalf("receipt %s on delivery %d (%+v), want replayed on a redelivery", rc.Outcome, rc.Delivery.Delivered, rc.Rejection)
	}
	if issued, err := time.Parse(time.RFC3339Nano, rc.IssuedAt); err != nil || !issued.After(notAfter) {
		t.Fatalf("the redelivery's receipt was issued at %q (%v), want after not_after %s", rc.IssuedAt, err, notAfter)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}
