package audit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func sendAll(t *testing.T, env *testenv.Env, envelopes ...[]byte) []*document.Receipt {
	t.Helper()
	var out []*document.Receipt
	for _, e := range envelopes {
		out = append(out, env.Send(e))
	}
	return out
}

func verify(t *testing.T, env *testenv.Env) audit.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := audit.Load(ctx, env.NC)
	if err != nil {
		t.Fatal(err)
	}
	return audit.Verify(in)
}

func figure(rep audit.Report, id string, name string) int64 {
	for _, c := range rep.Checks {
		if c.ID == id {
			for _, f := range c.Figures {
				if f.Name == name {
					return f.Value
				}
			}
		}
	}
	return -1
}

func TestVerifyHoldsAfterResendsConflictsRejectionsAndALostReply(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope(), s.Original.Envelope(), s.Changed.Envelope(), s.NewIntent.Envelope())
	for _, c := range s.TamperedCases() {
		sendAll(t, env, c.Envelope)
	}
	if _, err := env.Service.ArmFault(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	sendAll(t, env, s.NewIntent.Envelope())

	rep := verify(t, env)
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("check %s (%s) failed: %v", c.ID, c.Name, c.Violations)
		}
	}
	if !rep.OK {
		t.Fatal("verify failed on a correct run")
	}
	if got := figure(rep, "requests-accounted", "of which replies dropped by the service"); got != 1 {
		t.Errorf("dropped replies %d, want 1", got)
	}
	if got := figure(rep, "rejected-not-called", "rejected messages"); got != int64(len(s.TamperedCases())) {
		t.Errorf("rejected messages %d, want %d", got, len(s.TamperedCases()))
	}
	if got := figure(rep, "first-records-unchanged", "conflicts"); got != 1 {
		t.Errorf("conflicts %d, want 1", got)
	}
}

func TestVerifyFailsAndNamesTheIntentsWhenTheServiceCreatesOnEveryCall(t *testing.T) {
	env := testenv.StartWith(t, embedded.StackOptions{UnsafeCreateEveryCall: true})
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope(), s.Original.Envelope(), s.NewIntent.Envelope())
	rep := verify(t, env)
	if rep.OK {
		t.Fatal("verify passed although the service created twice for one intent")
	}
	var named bool
	for _, c := range rep.Checks {
		if c.ID == "one-create-per-key" {
			if c.OK {
				t.Fatal("check 2 passed")
			}
			named = strings.Contains(strings.Join(c.Violations, "\n"), `intent "intent-0001" in scope "default" was created 2 times`)
		}
	}
	if !named {
		t.Fatalf("check 2 does not name intent-0001: %+v", rep.Checks[1].Violations)
	}
}

func TestVerifyFailsWhenAMessageHasNoReceipt(t *testing.T) {
	env := testenv.Start(t)
	s := testenv.Seed(t)
	// No executor runs: the message stays without a receipt.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := env.JS.Publish(ctx, "approvals.default.intent-0001", s.Original.Envelope()); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, env)
	if rep.OK || rep.Checks[0].OK {
		t.Fatalf("verify passed with an unanswered message: %+v", rep.Checks[0])
	}
}
