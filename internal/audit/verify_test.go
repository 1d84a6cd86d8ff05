package audit_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/sendtwice/sendtwice/internal/audit"
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

// checkNamed is the report's check named id, or a zero Check (not OK)
// when the report has none.
func checkNamed(rep audit.Report, id string) audit.Check {
	for _, c := range rep.Checks {
		if c.ID == id {
			return c
		}
	}
	return audit.Check{}
}

func figure(rep audit.Report, id string, name string) int64 {
	for _, f := range checkNamed(rep, id).Figures {
		if f.Name == name {
			return f.Value
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
	c := checkNamed(rep, "one-create-per-key")
	if c.OK {
		t.Fatal("check 2 passed")
	}
	if !strings.Contains(strings.Join(c.Violations, "\n"), `intent "intent-0001" in scope "default" was created 2 times`) {
		t.Fatalf("check 2 does not name intent-0001: %+v", c.Violations)
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
	if c := checkNamed(rep, "one-terminal-outcome"); rep.OK || c.OK {
		t.Fatalf("verify passed with an unanswered message: %+v", c)
	}
}

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

const evil = "EVIL: wire 1M"

// TestAForgedCreateUnderAnApprovedDigestIsRefusedAndTheApprovalIsCreatedAsApproved
// is the attack of a client with create rights, over NATS against the real
// service: it names an approved intent id and request digest, asks for a
// task of its own and makes up a call reference. Each attempt is refused
// with its check and field and recorded; nothing is created; the approval's
// own delivery then creates the approved task, and verify reports the
// attempts.
func TestAForgedCreateUnderAnApprovedDigestIsRefusedAndTheApprovalIsCreatedAsApproved(t *testing.T) {
	env := testenv.Start(t)
	s := testenv.Seed(t)
	v, err := gate.CheckBindings(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	q := v.Request
	mallory := "person-mallory"
	// The forged request document: the approved one with the attacker's
	// task, sent under the approved digest.
	var forgedDoc map[string]any
	if err := json.Unmarshal(v.RequestJSON, &forgedDoc); err != nil {
		t.Fatal(err)
	}
	forgedDoc["task"] = map[string]any{"title": evil, "assignee_person_ref": mallory, "due_at": nil}
	forgedJSON, err := json.Marshal(forgedDoc)
	if err != nil {
		t.Fatal(err)
	}

	attempts := []struct {
		name         string
		request      []byte // nil = no request member
		check, field string
	}{
		{"its own task without a request", nil, provider.CheckRequestFormat, "request"},
		{"its own task beside the approved request", v.RequestJSON, provider.CheckRequestBinding, "task.title"},
		{"a request document of its own under the approved digest", forgedJSON, provider.CheckRequestDigest, "request_digest"},
	}
	for i, a := range attempts {
		t.Run("a create with "+a.name+" is refused at "+a.field+" and recorded", func(t *testing.T) {
			call := map[string]any{"intent_id": q.IntentID, "request_digest": v.RequestDigest,
				"task":     map[string]any{"title": evil, "assignee_person_ref": mallory, "due_at": nil},
				"call_ref": topology.CallRef(1, uint64(i+2), "made-up")}
			if a.request != nil {
				call["request"] = json.RawMessage(a.request)
			}
			body, err := json.Marshal(call)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := env.NC.RequestWithContext(ctx5(t), provider.SubjectCreate, body)
			if err != nil {
				t.Fatal(err)
			}
			code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
			if code != provider.CodeBadRequest || !strings.Contains(desc, a.check) || !strings.Contains(desc, a.field) {
				t.Fatalf("reply %q %q (data %s); want a 400 naming %s and %s", code, desc, msg.Data, a.check, a.field)
			}
			if got, want := env.Counts(), (provider.Counts{RequestsReceived: int64(i + 1)}); got != want {
				t.Fatalf("counts %+v, want %+v: recorded, nothing created", got, want)
			}
		})
	}

	// The approval's own delivery creates the approved task.
	env.Executor(executor.Config{ID: "exec-1"})
	rc := sendAll(t, env, s.Original.Envelope())[0]
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the approved delivery is %s, want created", rc.Outcome)
	}
	in, err := audit.Load(ctx5(t), env.NC)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Tasks) != 1 || in.Tasks[0].Task.Title != q.Task.Title || !sameRef(in.Tasks[0].Task.AssigneePersonRef, q.Task.AssigneePersonRef) ||
		!sameRef(in.Tasks[0].Task.DueAt, q.Task.DueAt) {
		t.Fatalf("tasks %+v, want the approved task only", in.Tasks)
	}
	var refused []string
	for _, r := range in.Requests {
		if r.Outcome == provider.OutcomeRefused && r.Refusal != nil {
			refused = append(refused, r.Refusal.Field)
		}
	}
	if !slices.Equal(refused, []string{"request", "task.title", "request_digest"}) {
		t.Fatalf("refused requests at %v, want the three attempts", refused)
	}

	rep := audit.Verify(in)
	expectFailing(t, rep, []string{"content-as-approved"})
	expectViolation(t, rep, `request 1 (intent "intent-0001", call reference "APPROVALS:1:2:made-up") was refused by the service, request_format failed at request`,
		`request 2 (intent "intent-0001", call reference "APPROVALS:1:3:made-up") was refused by the service, request_binding failed at task.title`,
		`request 3 (intent "intent-0001", call reference "APPROVALS:1:4:made-up") was refused by the service, request_digest failed at request_digest`)
}

func sameRef(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
