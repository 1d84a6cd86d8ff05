package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestKeyDeadlineIsTheApprovalsNotAfterPlusHowLongTheStreamCanStillDeliverIt(t *testing.T) {
	notAfter := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		notAfter     time.Time
		deliveryWait time.Duration
		want         time.Time
	}{
		{"an approval valid until noon on a stream that keeps messages 2h is kept until 14:00", notAfter, 2 * time.Hour, notAfter.Add(2 * time.Hour)},
		{"the default stream age of 7 days is added whole", notAfter, 7 * 24 * time.Hour, notAfter.Add(7 * 24 * time.Hour)},
		{"an unsigned approval (no not_after) is kept for ever", time.Time{}, 2 * time.Hour, time.Time{}},
		{"a stream that keeps messages for ever keeps the key for ever", notAfter, 0, time.Time{}},
		{"a negative wait is read as for ever, never as a shorter key", notAfter, -time.Hour, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := executor.KeyDeadline(c.notAfter, c.deliveryWait); !got.Equal(c.want) {
				t.Fatalf("KeyDeadline(%v, %v) = %v, want %v", c.notAfter, c.deliveryWait, got, c.want)
			}
		})
	}
}

// TestTheServiceKeepsAKeyUntilTheApprovalsNotAfterPlusTheApprovalsStreamsMaxAge
// sends a signed approval through a real executor to the fake service and
// reads back, from the service's own records, the not_after the call
// carried and the keep_until of the key: the approval's not_after plus the
// APPROVALS stream's MaxAge, plus the service's clock allowance and margin.
func TestTheServiceKeepsAKeyUntilTheApprovalsNotAfterPlusTheApprovalsStreamsMaxAge(t *testing.T) {
	const allowance, margin = 3 * time.Minute, 20 * time.Minute
	key := scenario.TestKey()
	a := sign.ApproverFor(scenario.Reviewer, key.Public())
	a.Scopes = []string{"team-a"}
	kr, err := sign.NewKeyring(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		maxAge   time.Duration
		noRecord bool
	}{
		{"on a stream that keeps approvals 90 minutes", 90 * time.Minute, false},
		{"on a stream that keeps approvals 7 days (the default)", 0, false},
		{"with no record of what was provisioned, for ever", 90 * time.Minute, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.StartWith(t, embedded.StackOptions{KeyClockAllowance: allowance, KeyMargin: margin})
			topo := testenv.Topology
			topo.MaxAge = c.maxAge
			cfg := executor.Config{ID: "exec-1", Topology: topo, Gate: &gate.Checker{Keys: kr}}
			if c.noRecord {
				// Provisioned, then the record lost: an executor that
				// does not provision has nothing that says how long a
				// message may wait.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := topology.Ensure(ctx, env.JS, topo); err != nil {
					t.Fatal(err)
				}
				if err := env.JS.DeleteKeyValue(ctx, topology.RecordBucket); err != nil {
					t.Fatal(err)
				}
				cfg.NoProvision = true
			}
			env.Executor(cfg)
			maxAge := topo.WithDefaults().MaxAge

			at := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
			notAfter := at.Add(24 * time.Hour)
			m, err := scenario.ApproveInScope(scenario.Candidate(), "team-a", "task-request-0001", "intent-0001", scenario.Title,
				approve.Options{ID: "approval-0001", At: at, Key: key, NotAfter: notAfter})
			if err != nil {
				t.Fatal(err)
			}
			if rc := send(t, env, m.Envelope()); rc.Outcome != document.OutcomeCreated {
				t.Fatalf("receipt %s (%+v), want created", rc.Outcome, rc.Rejection)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reqs, err := env.Service.Records(ctx, provider.RecordsRequest{Kind: provider.RecordRequests, Scope: "team-a", IntentID: "intent-0001"})
			if err != nil {
				t.Fatal(err)
			}
			deadline := notAfter.Add(maxAge)
			if c.noRecord {
				if len(reqs.Requests) != 1 || reqs.Requests[0].NotAfter != "" {
					t.Fatalf("the service received %+v, want one call without a deadline (the key kept for ever)", reqs.Requests)
				}
				return
			}
			if len(reqs.Requests) != 1 {
				t.Fatalf("the service received %d calls for (team-a, intent-0001), want 1", len(reqs.Requests))
			}
			if got := reqs.Requests[0].NotAfter; got != deadline.Format(time.RFC3339) {
				t.Errorf("the call carried not_after %s, want %s (the approval's %s plus the stream's MaxAge %s)",
					got, deadline.Format(time.RFC3339), notAfter.Format(time.RFC3339), maxAge)
			}
			keys, err := env.Service.Records(ctx, provider.RecordsRequest{Kind: provider.RecordIntents, Scope: "team-a", IntentID: "intent-0001"})
			if err != nil {
				t.Fatal(err)
			}
			want := deadline.Add(allowance + margin)
			if len(keys.Intents) != 1 {
				t.Fatalf("the service keeps %d keys for (team-a, intent-0001), want 1", len(keys.Intents))
			}
			got, err := time.Parse(time.RFC3339Nano, keys.Intents[0].KeepUntil)
			if err != nil || !got.Equal(want) {
				t.Fatalf("the key is kept until %q, want %s: not_after %s + MaxAge %s + allowance %s + margin %s",
					keys.Intents[0].KeepUntil, want.Format(time.RFC3339), notAfter.Format(time.RFC3339), maxAge, allowance, margin)
			}
		})
	}
}
