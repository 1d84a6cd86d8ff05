package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/internal/linearize"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/subjects"
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
			rc := env.Send(inScope(t, c.scope, true, now).Envelope())
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
		rc := env.Send(inScope(t, "team-a", true, now).Envelope())
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
	s := testenv.Seed(t)
	first := env.Send(s.Original.Envelope())
	if first.Outcome != document.OutcomeCreated || first.TaskDeleted || first.Scope != "default" {
		t.Fatalf("first receipt %s, task_deleted %v, scope %q; want created, not deleted, default", first.Outcome, first.TaskDeleted, first.Scope)
	}
	second := env.Send(s.Original.Envelope())
	if second.Outcome != document.OutcomeReplayed || !second.TaskDeleted || *second.TaskID != *first.TaskID {
		t.Fatalf("second receipt %s, task_deleted %v, task %s; want replayed, deleted, %s", second.Outcome, second.TaskDeleted, *second.TaskID, *first.TaskID)
	}
	wantCounts(t, env.Counts(), 2, 1, 1)
}

// A delivery's receipt is filed under the scope its subject names, where
// the one who could publish on that subject may read it: never under a
// scope the request names but the subject does not, and under the unknown
// scope when the subject names none.
func TestAReceiptIsFiledUnderTheScopeOfItsDeliverySubject(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
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

// byScope records each call in the history of its scope: a history per
// scope, checked on its own, is a check per key (scope, intent id), since
// the same intent ids are used in every scope.
type byScope struct {
	svc  taskservice.Service
	recs map[string]*history.Recorder
}

func (b byScope) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	rec, ok := b.recs[req.Scope]
	if !ok {
		return taskservice.Result{}, fmt.Errorf("a call in scope %q, which the test never sent", req.Scope)
	}
	return rec.Wrap(b.svc).Create(ctx, req)
}

// sentKey is the key a published message was approved for.
type sentKey struct{ scope, intent string }

// TestEightScopesOfTheSameSixteenIntentIdsCreateOneTaskPerKeyUnderResendsRedeliveriesAndLostReplies
// sends 8 scopes × the same 16 intent ids, signed by an approver trusted
// for those scopes in the trusted-approvers file, all at once and resent
// at random, through three executors on a real JetStream and the fake
// service, while deliveries stall past AckWait after the call or before
// the ack (redeliveries) and the service withholds replies after
// committing (lost replies). The
// service creates exactly one task per key (16 per scope, 128 in all, by
// its own counters), every receipt names a task of its own scope and
// intent (by the service's task records), and each scope's history of
// calls is linearizable per intent id.
func TestEightScopesOfTheSameSixteenIntentIdsCreateOneTaskPerKeyUnderResendsRedeliveriesAndLostReplies(t *testing.T) {
	const nScopes, nIntents, executors = 8, 16, 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 23))

	scopes := make([]string, nScopes)
	for i := range scopes {
		scopes[i] = fmt.Sprintf("team-%d", i+1)
	}
	key := scenario.TestKey()
	approver := sign.ApproverFor(scenario.Reviewer, key.Public())
	approver.Scopes = scopes
	// The executors trust the approver for those scopes by the
	// trusted-approvers file, as the command's --trusted-approvers reads it.
	trusted := filepath.Join(t.TempDir(), "trusted-approvers.json")
	if err := sign.WriteTrusted(trusted, approver); err != nil {
		t.Fatal(err)
	}
	kr, err := sign.LoadTrusted(trusted)
	if err != nil {
		t.Fatal(err)
	}
	if got := kr.Approvers(); len(got) != 1 || len(got[0].Scopes) != nScopes {
		t.Fatalf("the trusted-approvers file reads back as %+v, want one approver for %d scopes", got, nScopes)
	}
	at := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	var envelopes [][]byte
	for _, scope := range scopes {
		for i := 1; i <= nIntents; i++ {
			m, err := scenario.ApproveInScope(scenario.Candidate(), scope, fmt.Sprintf("task-request-%s-%02d", scope, i),
				fmt.Sprintf("intent-%02d", i), fmt.Sprintf("%s #%d", scenario.Title, i),
				approve.Options{ID: fmt.Sprintf("approval-%s-%02d", scope, i), At: at, Key: key, Lifetime: 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			envelopes = append(envelopes, m.Envelope())
		}
	}
	// Every approval once, and as many resends of approvals chosen at
	// random, in a random order.
	sends := append([][]byte(nil), envelopes...)
	for range envelopes {
		sends = append(sends, envelopes[r.IntN(len(envelopes))])
	}
	r.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })

	env := testenv.Start(t)
	dir := t.TempDir()
	recs := map[string]*history.Recorder{}
	for _, scope := range scopes {
		rec, err := history.Open(filepath.Join(dir, scope+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rec.Close() })
		recs[scope] = rec
	}
	topo := topology.Config{AckWait: time.Second, MaxDeliver: 20, NakDelay: 50 * time.Millisecond, MaxNakDelay: 300 * time.Millisecond}
	stall := topo.AckWait + 500*time.Millisecond
	var faultMu sync.Mutex
	faults := map[executor.Point]int{}
	fault := func(p executor.Point, _, delivered uint64, _ string) {
		// Only first deliveries stall, so that every message ends.
		if delivered != 1 || p != executor.AfterCall && p != executor.BeforeAck {
			return
		}
		faultMu.Lock()
		fire := r.Float64() < 0.1
		if fire {
			faults[p]++
		}
		faultMu.Unlock()
		if fire {
			time.Sleep(stall) // past AckWait, without progress: delivered again
		}
	}
	for i := 1; i <= executors; i++ {
		nc, err := nats.Connect(env.URL(), nats.Name("test-executor-service-client"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		c := provider.NewClient(nc)
		c.Timeout = 500 * time.Millisecond
		env.Executor(executor.Config{ID: fmt.Sprintf("exec-%d", i), Topology: topo, CallTimeout: c.Timeout,
			Gate: &gate.Checker{Keys: kr}, TaskService: byScope{svc: c.TaskService(), recs: recs}, Fault: fault})
	}

	// Lost replies, armed a few at a time while the sends go on.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sendsDone := make(chan struct{})
	armed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { armed <- n }()
		for i := 0; i < 20; i++ {
			select {
			case <-sendsDone:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := env.Service.ArmFault(ctx, 1+i%3); err == nil {
				n += 1 + i%3
			}
		}
	}()
	sent := map[uint64]sentKey{}
	var sentMu sync.Mutex
	var wg sync.WaitGroup
	for p := 0; p < nScopes; p++ {
		wg.Go(func() {
			for i := p; i < len(sends); i += nScopes {
				s, err := testenv.Publish(ctx, env.JS, sends[i])
				if err != nil {
					t.Errorf("publishing: %v", err)
					return
				}
				sentMu.Lock()
				sent[s.StreamSeq] = sentKey{s.Scope, s.IntentID}
				sentMu.Unlock()
			}
		})
	}
	wg.Wait()
	close(sendsDone)
	dropsArmed := <-armed
	if _, err := env.Service.ArmFault(ctx, 0); err != nil {
		t.Fatalf("disarming the service's fault switch: %v", err)
	}
	if t.Failed() {
		return
	}
	if len(sent) != len(sends) {
		t.Fatalf("%d messages stored for %d sends", len(sent), len(sends))
	}

	var in *audit.Input
	for {
		if ctx.Err() != nil {
			t.Fatalf("not every message got its receipt: %v", ctx.Err())
		}
		if in, err = audit.Load(ctx, env.NC); err == nil && in.Consumer.Pending == 0 && in.Consumer.AckPending == 0 && allReceipted(in, sent) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	faultMu.Lock()
	t.Logf("%d sends of %d approvals; stalls past AckWait %v; replies armed to drop %d; deliveries %d",
		len(sends), len(envelopes), faults, dropsArmed, in.Consumer.Delivered)
	faultMu.Unlock()

	t.Run("the service created exactly 16 tasks in each of the 8 scopes", func(t *testing.T) {
		info, err := env.Service.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Counts.CreatesExecuted != nScopes*nIntents || info.Counts.TasksExisting != nScopes*nIntents {
			t.Errorf("the service's counters %+v, want %d creates and tasks", info.Counts, nScopes*nIntents)
		}
		per := map[string]provider.ScopeCounts{}
		for _, s := range info.Scopes {
			per[s.Scope] = s
		}
		for _, scope := range scopes {
			if s := per[scope]; s.CreatesExecuted != nIntents || s.TasksExisting != nIntents {
				t.Errorf("scope %s: counters %+v, want %d creates and tasks", scope, s.Counts, nIntents)
			}
		}
		if len(per) != nScopes {
			t.Errorf("the service counts %d scopes, want %d: %+v", len(per), nScopes, info.Scopes)
		}
	})

	t.Run("every receipt names the task of its own key, by the service's task records", func(t *testing.T) {
		tasks := map[string]provider.TaskRecord{}
		for _, tr := range in.Tasks {
			tasks[tr.TaskID] = tr
		}
		bound := map[sentKey]string{}
		created := map[sentKey]int{}
		for seq, k := range sent {
			for _, rc := range in.Receipts[seq] {
				if rc.Outcome != document.OutcomeCreated && rc.Outcome != document.OutcomeReplayed {
					t.Errorf("message %d (%s, %s): receipt %s (%+v), want created or replayed", seq, k.scope, k.intent, rc.Outcome, rc.Rejection)
					continue
				}
				if rc.Outcome == document.OutcomeCreated {
					created[k]++
				}
				tr, ok := tasks[deref(rc.TaskID)]
				switch {
				case rc.Scope != k.scope:
					t.Errorf("message %d (%s, %s): the receipt names scope %q", seq, k.scope, k.intent, rc.Scope)
				case !ok:
					t.Errorf("message %d (%s, %s): the receipt names task %q, which the service does not hold", seq, k.scope, k.intent, deref(rc.TaskID))
				case tr.Scope != k.scope || tr.IntentID != k.intent:
					t.Errorf("message %d (%s, %s): the receipt names task %s of (%s, %s)", seq, k.scope, k.intent, tr.TaskID, tr.Scope, tr.IntentID)
				case bound[k] != "" && bound[k] != tr.TaskID:
					t.Errorf("message %d (%s, %s): the receipt names task %s, another receipt of the key %s", seq, k.scope, k.intent, tr.TaskID, bound[k])
				default:
					bound[k] = tr.TaskID
				}
			}
		}
		if len(bound) != nScopes*nIntents {
			t.Errorf("receipts name the tasks of %d keys, want %d", len(bound), nScopes*nIntents)
		}
		for k, n := range created {
			if n > 1 {
				t.Errorf("(%s, %s) has %d created receipts", k.scope, k.intent, n)
			}
		}
	})

	t.Run("the audit of the streams and the service's records finds no violation", func(t *testing.T) {
		rep := audit.VerifyWith(in, audit.Options{Gate: &gate.Checker{Keys: kr}})
		if !rep.OK {
			for _, c := range rep.Checks {
				if !c.OK {
					t.Errorf("check %d (%s) failed: %v", c.N, c.Name, c.Violations)
				}
			}
		}
	})

	t.Run("each scope's history of calls is linearizable per intent id", func(t *testing.T) {
		for _, scope := range scopes {
			rec := recs[scope]
			if err := rec.Err(); err != nil {
				t.Fatalf("recording scope %s: %v", scope, err)
			}
			res, err := linearize.CheckFiles(linearize.Options{Visualization: filepath.Join(t.ArtifactDir(), "linearizability-"+scope+".html"), Timeout: time.Minute},
				rec.Path())
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || res.Intents != nIntents {
				t.Errorf("scope %s: %s (want %d intents, linearizable)", scope, res, nIntents)
			}
		}
	})
}

// allReceipted says whether every message sent has a receipt.
func allReceipted(in *audit.Input, sent map[uint64]sentKey) bool {
	for seq := range sent {
		if len(in.Receipts[seq]) == 0 {
			return false
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
