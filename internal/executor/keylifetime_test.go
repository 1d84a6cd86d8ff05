package executor_test

import (
	"context"
	"encoding/json"
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
			if rc := env.Send(m.Envelope()); rc.Outcome != document.OutcomeCreated {
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

// TestAResendAfterItsKeyWasCompactedIsRefusedAtExpiryAndNeverReachesTheService
// is the end-to-end proof of a key's lifetime, with real short durations
// (an approval valid for seconds, an APPROVALS stream that keeps messages
// 2 s, a service whose clock allowance and margin are a fraction of a
// second and which compacts in the background every 100 ms). It waits on
// conditions only: the key compacted by the service, never a sleep.
func TestAResendAfterItsKeyWasCompactedIsRefusedAtExpiryAndNeverReachesTheService(t *testing.T) {
	const scope, intent = "team-a", "intent-0001"
	env := testenv.StartWith(t, embedded.StackOptions{
		KeyClockAllowance: 200 * time.Millisecond, KeyMargin: 200 * time.Millisecond, CompactEvery: 100 * time.Millisecond})
	topo := testenv.Topology
	topo.MaxAge, topo.DuplicateWindow = 2*time.Second, time.Second
	key := scenario.TestKey()
	a := sign.ApproverFor(scenario.Reviewer, key.Public())
	a.Scopes = []string{scope}
	kr, err := sign.NewKeyring(a)
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Topology: topo, Gate: &gate.Checker{Keys: kr}})

	// Approved a minute ago, valid for a few seconds more: long enough for
	// the first send and a resend to be stored before not_after on a loaded
	// machine.
	now := time.Now().UTC().Truncate(time.Second)
	m, err := scenario.ApproveInScope(scenario.Candidate(), scope, "task-request-0001", intent, scenario.Title,
		approve.Options{ID: "approval-0001", At: now.Add(-time.Minute), Key: key, NotAfter: now.Add(8 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keyRecords := func() []provider.FirstResult {
		t.Helper()
		r, err := env.Service.Records(ctx, provider.RecordsRequest{Kind: provider.RecordIntents, Scope: scope, IntentID: intent})
		if err != nil {
			t.Fatalf("reading the service's key records: %v", err)
		}
		return r.Intents
	}
	scopeCounts := func() provider.ScopeCounts {
		t.Helper()
		info, err := env.Service.Info(ctx)
		if err != nil {
			t.Fatalf("reading the service's stats: %v", err)
		}
		for _, s := range info.Scopes {
			if s.Scope == scope {
				return s
			}
		}
		return provider.ScopeCounts{Scope: scope}
	}

	var task string
	t.Run("the first send is created", func(t *testing.T) {
		rc := env.Send(m.Envelope())
		if rc.Outcome != document.OutcomeCreated || rc.TaskID == nil {
			t.Fatalf("receipt %s (%+v), want created", rc.Outcome, rc.Rejection)
		}
		task = *rc.TaskID
	})
	t.Run("a resend while the approval is still valid is replayed with the first task", func(t *testing.T) {
		rc := env.Send(m.Envelope())
		if rc.Outcome != document.OutcomeReplayed || rc.TaskID == nil || *rc.TaskID != task {
			t.Fatalf("receipt %s (task %v, %+v), want replayed %s", rc.Outcome, rc.TaskID, rc.Rejection, task)
		}
		if got := len(keyRecords()); got != 1 {
			t.Fatalf("the service keeps %d keys for (%s, %s), want 1", got, scope, intent)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("the service compacts the key once the approval can no longer be delivered", func(t *testing.T) {
		for len(keyRecords()) != 0 || scopeCounts().KeysCompacted != 1 {
			if ctx.Err() != nil {
				t.Fatalf("the key was not compacted: %+v", scopeCounts())
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if t.Failed() {
		return
	}
	before := scopeCounts()
	t.Run("a resend after the key was compacted is rejected at expiry with no call to the service", func(t *testing.T) {
		rc := env.Send(m.Envelope())
		if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckExpiry {
			t.Fatalf("receipt %s (%+v), want rejected at %s", rc.Outcome, rc.Rejection, gate.CheckExpiry)
		}
		after := scopeCounts()
		if after.Counts != before.Counts || after.CreatesExecuted != 1 || after.TasksExisting != 1 {
			t.Fatalf("the service's counters for %s moved from %+v to %+v: want no call, one create, one task", scope, before.Counts, after.Counts)
		}
		if got := len(keyRecords()); got != 0 {
			t.Fatalf("the service keeps %d keys for (%s, %s) again, want none", got, scope, intent)
		}
	})
}

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
			rc := env.Send(c.envelope)
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != c.check {
				t.Fatalf("receipt %+v (%+v), want rejected at %s", rc.Outcome, rc.Rejection, c.check)
			}
		})
	}
	wantCounts(t, env.Counts(), 0, 0, 0)
	if rc := env.Send(s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
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
	rc := env.Send(s.Original.Envelope())
	if rc.Outcome != document.OutcomeReplayed || rc.Delivery.Delivered < 2 {
		t.Fatalf("receipt %s on delivery %d (%+v), want replayed on a redelivery", rc.Outcome, rc.Delivery.Delivered, rc.Rejection)
	}
	if issued, err := time.Parse(time.RFC3339Nano, rc.IssuedAt); err != nil || !issued.After(notAfter) {
		t.Fatalf("the redelivery's receipt was issued at %q (%v), want after not_after %s", rc.IssuedAt, err, notAfter)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}
