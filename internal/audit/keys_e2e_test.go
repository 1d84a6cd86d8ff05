package audit_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// TestVerifyPassesTwoScopesADeleteAndACompactionThroughTheRealService runs
// signed approvals in two scopes with one intent id through an executor and
// the fake task service, deletes one scope's task and resends its
// approval, then moves the service's clock past the keys' deadline and
// compacts them: verify, reading all of it, holds, and counts the
// compacted keys outside its window.
func TestVerifyPassesTwoScopesADeleteAndACompactionThroughTheRealService(t *testing.T) {
	var ahead atomic.Int64 // how far the service's clock runs ahead, in ns
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	env := testenv.StartWith(t, embedded.StackOptions{Clock: clock})
	kr, err := sign.NewKeyring(func() sign.Approver {
		a := sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public())
		a.Scopes = []string{sign.AllScopes}
		return a
	}())
	if err != nil {
		t.Fatal(err)
	}
	checker := &gate.Checker{Keys: kr}
	env.Executor(executor.Config{ID: "exec-1", Gate: checker})
	s, err := scenario.BuildSigned(scenario.TestKey(), time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	teamB, err := s.InScope(s.Original, "team-b")
	if err != nil {
		t.Fatal(err)
	}
	rs := sendAll(t, env, s.Original.Envelope(), teamB.Envelope(), s.NewIntent.Envelope(), s.Original.Envelope())
	for i, want := range []string{document.OutcomeCreated, document.OutcomeCreated, document.OutcomeCreated, document.OutcomeReplayed} {
		if rs[i].Outcome != want {
			t.Fatalf("receipt %d: %s, want %s", i, rs[i].Outcome, want)
		}
	}
	if *rs[0].TaskID == *rs[1].TaskID || rs[1].Scope != "team-b" {
		t.Fatalf("the two scopes' receipts %+v and %+v do not name two tasks", rs[0], rs[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Service.Delete(ctx, provider.DeleteRequest{Scope: "team-b", IntentID: "intent-0001"}); err != nil {
		t.Fatal(err)
	}
	if r := sendAll(t, env, teamB.Envelope())[0]; r.Outcome != document.OutcomeReplayed || !r.TaskDeleted || *r.TaskID != *rs[1].TaskID {
		t.Fatalf("the resend after the delete: %+v; want replayed %s, task deleted", r, *rs[1].TaskID)
	}

	// Past every key's deadline: not_after + the stream's max age (7 days)
	// + the clock allowance and margin (5m, 1h).
	ahead.Store(int64(8*24*time.Hour + 2*time.Hour))
	res, err := env.Stack.Store.Compact(ctx)
	if err != nil || res.KeysCompacted != 3 {
		t.Fatalf("compaction: %+v, %v; want 3 keys compacted", res, err)
	}

	in, err := audit.Load(ctx, env.NC)
	if err != nil {
		t.Fatal(err)
	}
	in.Now = clock()
	rep := audit.VerifyWith(in, audit.Options{Gate: checker})
	if !rep.OK {
		t.Fatalf("verify failed:\n%s", violations(rep))
	}
	for _, f := range []struct {
		check string
		name  string
		want  int64
	}{
		{"one-create-per-key", "keys with a create", 3},
		{"one-create-per-key", "receipts whose key was compacted after its deadline (outside the audit window)", 5},
		{"one-create-per-key", "replayed receipts of a deleted task", 1},
		{"counters", "creates executed", 3},
		{"counters", "tasks existing", 2},
		{"counters", "tasks deleted", 1},
		{"counters", "keys compacted (intent records removed after their deadline, not a violation)", 3},
		{"counters", "intent records", 0},
		{"counters", "scopes", 2},
		{"first-records-unchanged", "replays and conflicts whose key was compacted after its deadline (outside the audit window)", 2},
	} {
		if got := figure(rep, f.check, f.name); got != f.want {
			t.Errorf("check %s: %q is %d, want %d", f.check, f.name, got, f.want)
		}
	}

	t.Run("the same store read before its keys' deadline fails: a key missing while an approval could resend it", func(t *testing.T) {
		in.Now = time.Now()
		rep := audit.VerifyWith(in, audit.Options{Gate: checker})
		if got, want := failing(rep.Checks), []string{"one-create-per-key", "first-records-unchanged"}; !slices.Equal(got, want) {
			t.Fatalf("failing checks %v, want %v:\n%s", got, want, violations(rep))
		}
	})
}
