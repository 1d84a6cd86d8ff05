package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// inScope is the seed's first request in scope (none when ""), approved by
// the test reviewer: signed, made at approvedAt and valid for a day, when
// signed is true.
func inScope(t testing.TB, scope string, signed bool, approvedAt time.Time) scenario.Approved {
	t.Helper()
	opts := approve.Options{ID: "approval-0001", At: approvedAt}
	if signed {
		opts.Key, opts.Lifetime = scenario.TestKey(), 24*time.Hour
	}
	m, err := scenario.ApproveInScope(scenario.Candidate(), scope, "task-request-0001", "intent-0001", scenario.Title, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAnApprovalForAScopeItsApproverIsNotTrustedForNeverReachesTheService(t *testing.T) {
	env := testenv.Start(t)
	a := sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public())
	a.Scopes = []string{"team-a"}
	kr, err := sign.NewKeyring(a)
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	now := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)

	for _, c := range []struct{ name, scope string }{
		{"a request for team-b", "team-b"},
		{"a request naming no scope (default)", ""},
	} {
		t.Run(c.name+" signed by a reviewer trusted for team-a only is rejected at scope", func(t *testing.T) {
			rc := send(t, env, inScope(t, c.scope, true, now).Envelope())
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckScope ||
				rc.Rejection.Path != "$.request.scope" {
				t.Fatalf("receipt %s (%+v), want rejected at scope, $.request.scope", rc.Outcome, rc.Rejection)
			}
			want := c.scope
			if want == "" {
				want = "default"
			}
			if rc.Scope != want {
				t.Errorf("the receipt names scope %q, want %q", rc.Scope, want)
			}
			wantCounts(t, env.Counts(), 0, 0, 0)
		})
	}
	t.Run("the same request for team-a passes the gate and reaches the service", func(t *testing.T) {
		// What the service answers for a scoped key is the service's own
		// business; here it matters only that the gate let this one through.
		rc := send(t, env, inScope(t, "team-a", true, now).Envelope())
		if rc.Outcome == document.OutcomeRejected {
			t.Fatalf("rejected at %+v, want it let through", rc.Rejection)
		}
		if got := env.Counts().RequestsReceived; got != 1 {
			t.Fatalf("the service received %d requests, want 1", got)
		}
		if rc.Scope != "team-a" {
			t.Errorf("the receipt names scope %q, want team-a", rc.Scope)
		}
	})
}

func TestTheCallCarriesTheKeysScopeAndTheApprovalsExpiry(t *testing.T) {
	kr := reviewerKeyring(t)
	at := scenario.ApprovedAt
	checker := &gate.Checker{Keys: kr, AllowUnsigned: true, Now: func() time.Time { return at.Add(time.Minute) }}
	for _, c := range []struct {
		name      string
		m         scenario.Approved
		scope     string
		notAfter  time.Time
		signedFor string
	}{
		{"a signed request naming no scope is called in default, until its not_after", inScope(t, "", true, at), "default", at.Add(24 * time.Hour), ""},
		{"an unsigned request naming team-a is called in team-a, with no expiry", inScope(t, "team-a", false, at), "team-a", time.Time{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := checker.Check(c.m.Envelope())
			if err != nil {
				t.Fatal(err)
			}
			req := executor.CallRequest(v, topology.CallRef(1, 1, "a"))
			if req.Scope != c.scope || !req.NotAfter.Equal(c.notAfter) {
				t.Fatalf("the call names scope %q and not_after %v, want %q and %v", req.Scope, req.NotAfter, c.scope, c.notAfter)
			}
		})
	}
}

// deletingService is the fake service as a service that remembers deleted
// tasks would answer: every replay says that its task was deleted.
type deletingService struct{ taskservice.Service }

func (d deletingService) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	res, err := d.Service.Create(ctx, req)
	if err == nil && res.Outcome == taskservice.Replayed {
		res.TaskDeleted = true
	}
	return res, err
}

func TestAReplayOfADeletedTaskSaysSoOnItsReceiptAndNothingElseDoes(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", TaskService: deletingService{env.Service.TaskService()}})
	s := seed(t)
	first := send(t, env, s.Original.Envelope())
	if first.Outcome != document.OutcomeCreated || first.TaskDeleted || first.Scope != "default" {
		t.Fatalf("first receipt %s, task_deleted %v, scope %q; want created, not deleted, default", first.Outcome, first.TaskDeleted, first.Scope)
	}
	second := send(t, env, s.Original.Envelope())
	if second.Outcome != document.OutcomeReplayed || !second.TaskDeleted || *second.TaskID != *first.TaskID {
		t.Fatalf("second receipt %s, task_deleted %v, task %s; want replayed, deleted, %s", second.Outcome, second.TaskDeleted, *second.TaskID, *first.TaskID)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}
