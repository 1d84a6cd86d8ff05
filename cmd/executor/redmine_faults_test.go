package main

// The Redmine adapter under faults the lookup, the per-key lock and the
// in-doubt record must survive: a lock holder stopped past its lock's TTL, the same fault run
// with the naive adapter (a create on every delivery) beside the protocol,
// and the linearizability check of the CalDAV tests applied to Redmine's
// history. Counted, as in redmine_test.go, from Redmine's own log and REST
// listing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/internal/linearize"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// stallTrials is N, the trials of each kind of stop.
const stallTrials = 3

// stopKind is where in its create a lock holder is stopped.
type stopKind struct {
	name string
	// hold pauses the holder at its point: the proxy keeps the request or
	// its answer.
	hold func(p *davtest.Proxy) *davtest.Hold
}

var stopKinds = []stopKind{
	{
		// The lookup has reached Redmine, its answer ("nothing carries
		// the key") has not reached the holder: the holder is before its
		// last Held check, and its call's deadline (shorter than the TTL)
		// has passed too when it continues.
		name: "in its lookup, before its last Held check",
		hold: func(p *davtest.Proxy) *davtest.Hold { return p.HoldAnswer(http.MethodGet, "/issues.json") },
	},
	{
		// Held said the lock is still the holder's and the POST is sent,
		// but has not reached Redmine: the window the lock cannot close,
		// and the key's in-doubt record does.
		name: "after its last Held check, its POST not yet at Redmine",
		hold: func(p *davtest.Proxy) *davtest.Hold { return p.HoldRequest(http.MethodPost, "/issues.json") },
	},
}

// stalled is one executor process with its own proxy in front of Redmine.
type stalled struct {
	id    string
	proxy *davtest.Proxy
	proc  *process
}

func TestRedmineALockHolderStoppedPastItsTTL(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	cand := scenario.Candidate()
	r := startRedmineRig(t)
	// Two executors, each through its own proxy, so that the proxy that
	// catches the paused request names the holder. Call timeout 1 s, lock
	// TTL 3 s, AckWait 2 s, request lifetime 20 s: a delivery whose holder
	// is stopped comes back to the other executor, which waits for the lock
	// to run out; a POST held for less than the lifetime keeps the key in
	// doubt.
	var sides []*stalled
	for i := 1; i <= 2; i++ {
		s := &stalled{id: fmt.Sprintf("exec-%d", i), proxy: davtest.NewProxy(t, r.srv.URL)}
		s.proc = r.executor(t, s.proxy.Rewrite(r.srv.URL), s.id, "--redmine-lock-ttl", "3s", "--redmine-request-lifetime", "20s", "--max-deliver", "10")
		// Runs before the executor's own cleanup: a stopped process
		// could not end on SIGTERM.
		t.Cleanup(func() { _ = s.proc.cmd.Process.Signal(syscall.SIGCONT) })
		sides = append(sides, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	awaitPullers(ctx, t, r.env, 2)

	intents := map[string][]string{}
	for ki, k := range stopKinds {
		for i := 1; i <= stallTrials; i++ {
			a, err := scenario.Redmine.Generate(cand, fmt.Sprintf("stop-%d", ki), i)
			if err != nil {
				t.Fatal(err)
			}
			envelope := a.Envelope()
			intent := document.Identify(envelope).IntentID
			intents[k.name] = append(intents[k.name], intent)
			holds := make([]*davtest.Hold, len(sides))
			for j, s := range sides {
				holds[j] = k.hold(s.proxy)
			}
			sent, err := testenv.Publish(ctx, r.env.JS, envelope)
			if err != nil {
				t.Fatal(err)
			}
			var holder int
			select {
			case <-holds[0].Caught():
				holder = 0
			case <-holds[1].Caught():
				holder = 1
			case <-ctx.Done():
				t.Fatalf("trial %s: no executor reached the point %s", intent, k.name)
			}
			holds[1-holder].Release() // disarmed: the other executor goes on freely
			h := sides[holder]
			_ = h.proc.cmd.Process.Signal(syscall.SIGSTOP)
			// The delivery comes back to the other executor after AckWait;
			// it takes the lock once the TTL has run out, finds nothing,
			// and creates unless the key is in doubt.
			time.Sleep(2*time.Second + 3*time.Second + 2*time.Second)
			_ = h.proc.cmd.Process.Signal(syscall.SIGCONT)
			holds[holder].Release()
			rc := receiptFor(t, r.env.JS, intent, sent.StreamSeq)
			t.Logf("trial %s: %s stopped %s; the other executor's receipt %s %s on delivery %d",
				intent, h.id, k.name, rc.Outcome, ptr(rc.TaskID), rc.Delivery.Delivered)
		}
	}
	// Whatever a continued holder still sends has reached Redmine by now
	// (its calls' deadlines have passed).
	time.Sleep(3 * time.Second)
	c := r.issues(t)
	received, created := r.srv.Posts()
	// The executors reach Redmine through their proxies, which pass every
	// request by now: verify audits the project the executors recorded,
	// given the API key and the URL they recorded, their last proxy's (the
	// key goes only to a URL on the command line; another URL would
	// contradict the record).
	rec, err := topology.ReadTaskService(ctx, r.env.JS)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	verr := run(context.Background(), []string{"verify", "--server", r.env.URL(), "--redmine-url", rec.RedmineURL, "--redmine-api-key-file", r.keyFile}, &out, &errOut)
	report := out.String() + errOut.String()
	for _, k := range stopKinds {
		dups := c.duplicates(intents[k.name])
		t.Logf("stopped %s: %d second issues in N=%d trials", k.name, dups, stallTrials)
		if dups != 0 {
			t.Errorf("stopped %s: %d second issues, want 0: the holder's Held check (or its call's deadline) must stop its POST, and a POST sent must leave its key in doubt", k.name, dups)
		}
		for _, intent := range intents[k.name] {
			ids := c.byIntent[intent]
			if len(ids) == 0 {
				t.Errorf("intent %s has no issue", intent)
			}
			if len(ids) < 2 {
				continue
			}
			// Verify finds every second issue and names the key and the
			// issues.
			if want := fmt.Sprintf("intent %q in scope %q has %d tasks", intent, "default", len(ids)); verr == nil || !strings.Contains(report, want) {
				t.Errorf("intent %s has issues %v; verify (%v) does not say %q", intent, ids, verr, want)
			}
			for _, id := range ids {
				if !strings.Contains(report, fmt.Sprintf("issue #%d", id)) {
					t.Errorf("intent %s has issues %v; verify does not name issue #%d", intent, ids, id)
				}
			}
		}
	}
	t.Logf("Redmine's log: %d POSTs, %d answered 201; %d issues listed; verify: %v\n%s", received, created, c.total, verr, violationLines(report))
}

// heldTrials is N for the holder paused with its deadline ahead.
const heldTrials = 3

// Serve refuses a lock TTL not longer than the call timeout, so a holder
// stopped past its TTL has also passed its call's deadline, and either
// stops its POST (the test above cannot tell which). Here an in-process
// executor is given what serve (and the adapter's own HTTP timeout)
// refuses, a call timeout (twice the TTL, bounding each HTTP exchange)
// longer than the lock's TTL, so that only the holder's Held check stands
// between a lost lock and a second issue: the holder is paused in its
// lookup (the proxy keeps the answer "nothing carries the key") past the
// TTL while a resend of the approval takes the lock and creates; then the
// holder goes on.
func TestRedmineHeldStopsAHolderWhoseLockRanOutWithItsDeadlineAhead(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	cand := scenario.Candidate()
	r := startRedmineRig(t)
	proxy := davtest.NewProxy(t, r.srv.URL)
	protocol, err := taskservice.KeepDeletedKeys(r.adapter(t, proxy.Rewrite(r.srv.URL), 0), r.locks)
	if err != nil {
		t.Fatal(err)
	}
	r.env.Executor(executor.Config{ID: "exec-1", TaskService: protocol, Gate: redmineGate(), CallTimeout: 2 * redmineTestTTL,
		Topology: topology.Config{AckWait: 20 * time.Second, MaxDeliver: 5, NakDelay: 200 * time.Millisecond, MaxNakDelay: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var intents []string
	for i := 1; i <= heldTrials; i++ {
		a, err := scenario.Redmine.Generate(cand, "held", i)
		if err != nil {
			t.Fatal(err)
		}
		intent := document.Identify(a.Envelope()).IntentID
		intents = append(intents, intent)
		hold := proxy.HoldAnswer(http.MethodGet, "/issues.json")
		first, err := testenv.Publish(ctx, r.env.JS, a.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-hold.Caught():
		case <-ctx.Done():
			t.Fatalf("trial %s: the lookup never reached the proxy", intent)
		}
		resend, err := testenv.Publish(ctx, r.env.JS, a.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		// The resend waits for the lock until its TTL runs out, finds
		// nothing and creates.
		second := receiptFor(t, r.env.JS, intent, resend.StreamSeq)
		hold.Release()
		rc := receiptFor(t, r.env.JS, intent, first.StreamSeq)
		t.Logf("trial %s: the resend %s %s while the first delivery was paused in its lookup; the first then %s %s on delivery %d",
			intent, second.Outcome, ptr(second.TaskID), rc.Outcome, ptr(rc.TaskID), rc.Delivery.Delivered)
	}
	c := r.issues(t)
	dups := c.duplicates(intents)
	t.Logf("a holder paused past its lock's TTL with its deadline ahead: %d second issues in N=%d trials; issues %v", dups, heldTrials, c.byIntent)
	if dups != 0 {
		t.Errorf("%d second issues, want 0: the holder's Held check must stop its POST", dups)
	}
}

// faultRun publishes every envelope twice (a resend) while the proxy loses
// the answers to the first drops POSTs, and waits for every receipt.
func faultRun(t *testing.T, r *redmineRig, proxy *davtest.Proxy, envelopes [][]byte, drops int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy.DropResponsesTo(http.MethodPost, drops)
	twice := make([][]byte, 0, 2*len(envelopes))
	for _, e := range envelopes {
		twice = append(twice, e, e)
	}
	pub := publishSpread(ctx, r.env.JS, twice, 20*time.Millisecond)
	if err := <-pub.done; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	seqs := pub.sent()
	byseq := awaitReceipts(t, r.env, seqs, 90*time.Second)
	outcomes := map[string]int{}
	for _, seq := range seqs {
		if len(byseq[seq]) == 0 {
			outcomes["dead letter"]++
			continue
		}
		outcomes[byseq[seq][0].Outcome]++
	}
	return outcomes
}

// Not parallel: the naive adapter's POSTs pile up on a loaded Redmine, and
// each one it answers late is delivered and POSTed again.
func TestRedmineTheProtocolAgainstTheNaiveAdapterUnderTheSameFaults(t *testing.T) {
	const intents, drops = 8, 2
	r := startRedmineRig(t)
	proxy := davtest.NewProxy(t, r.srv.URL)
	viaProxy := r.adapter(t, proxy.Rewrite(r.srv.URL), 3*time.Second)
	// Redeliveries up to 1 s apart. The protocol answers the redelivery of
	// a lost answer from its lookup at once; a few deliveries bound the
	// naive adapter's POSTs (each delivery is one more).
	topo := topology.Config{AckWait: 6 * time.Second, MaxDeliver: 4, NakDelay: 200 * time.Millisecond, MaxNakDelay: time.Second}
	protocol, err := taskservice.KeepDeletedKeys(viaProxy, r.locks)
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name string
		svc  taskservice.Service
	}{
		{"naive", viaProxy.Naive()},
		{"protocol", protocol},
	}
	dups := map[string]int{}
	for _, run := range runs {
		envelopes, ids := generateBatch(t, scenario.Redmine, run.name, intents)
		var stops []func()
		for i := 1; i <= 2; i++ {
			_, stop := r.env.Executor(executor.Config{ID: fmt.Sprintf("%s-%d", run.name, i), TaskService: run.svc, Gate: redmineGate(),
				CallTimeout: 3 * time.Second, Topology: topo, Concurrency: 4})
			stops = append(stops, stop)
		}
		before := proxy.Dropped()
		outcomes := faultRun(t, r, proxy, envelopes, drops)
		for _, stop := range stops {
			stop()
		}
		c := r.issues(t)
		dups[run.name] = c.duplicates(ids)
		t.Logf("%s: %d intents sent twice each, %d POST answers lost; receipts %v; %d issues for them, %d duplicates",
			run.name, intents, proxy.Dropped()-before, outcomes, len(ids)+dups[run.name], dups[run.name])
		for _, id := range ids {
			if len(c.byIntent[id]) == 0 {
				t.Errorf("%s: intent %s has no issue", run.name, id)
			}
		}
	}
	t.Logf("duplicate issues under the same faults (%d intents, each sent twice, %d lost answers): naive %d, protocol %d",
		intents, drops, dups["naive"], dups["protocol"])
	if dups["protocol"] != 0 {
		t.Errorf("the protocol made %d duplicate issues, want 0", dups["protocol"])
	}
	if dups["naive"] < intents {
		t.Errorf("the naive adapter made %d duplicate issues, want at least one per resent intent (%d): the run did not resend", dups["naive"], intents)
	}
}

func TestRedmineRestartedMidRunLosesNothingAndDoublesNothing(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	const batch = 30
	envelopes, intents := generateBatch(t, scenario.Redmine, "restart", batch)
	r := startRedmineRig(t)
	// The budget outlasts a restart: redeliveries come after 1 s, 2 s,
	// 4 s, …; a POST cut by the restart leaves its key in doubt for the
	// request lifetime (this private Redmine's: 10 s), and its message
	// comes back after it. A Redmine just booted on a busy machine answers
	// slowly: four calls at a time from each executor, each with the
	// patient timeout, so that the calls that time out do not fill its
	// few threads with work nobody waits for, wave after wave.
	for _, id := range []string{"exec-1", "exec-2"} {
		r.executor(t, r.srv.URL, id, append(slices.Clone(patient), "--concurrency", "4", "--max-deliver", "10",
			"--redmine-lock-ttl", patientLockTTL.String(), "--redmine-request-lifetime", "10s")...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	awaitPullers(ctx, t, r.env, 2)
	run := publishThroughARestart(ctx, t, r.env, envelopes, "Redmine", r.srv.Restart, 3*time.Minute)
	outcomes, dead := run.outcomes, run.dead
	received, created := r.srv.Posts()
	c := r.issues(t)
	t.Logf("restarted after %d receipts; receipts %v (%d on a redelivery), %d dead letters; Redmine's log: %d POSTs, %d answered 201; %d issues listed",
		run.restartedAfter, outcomes, run.redelivered, len(dead), received, created, c.total)
	for _, intent := range intents {
		if n := len(c.byIntent[intent]); n != 1 {
			t.Errorf("intent %s has %d issues %v, want 1", intent, n, c.byIntent[intent])
		}
	}
	if len(dead) != 0 {
		t.Errorf("%d messages were dead-lettered: %v", len(dead), dead)
	}
	if outcomes[document.OutcomeCreated]+outcomes[document.OutcomeReplayed] != batch {
		t.Errorf("receipts %v, want %d created or replayed", outcomes, batch)
	}
	// The listing is what Redmine holds; its log may lack the answer of a
	// POST the restart cut short, never show more 201s than issues.
	if c.total != batch || created > c.total {
		t.Errorf("%d issues listed and %d POSTs answered 201, want %d issues", c.total, created, batch)
	}
	// Verify agrees: one issue per key, named by its receipts.
	if report, err := verifyRedmine(t, r); err != nil {
		t.Errorf("verify after the restart: %v\n%s", err, violationLines(report))
	}
}

func TestRedmineCallsUnderFaultsAreLinearizable(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	const approvals, drops = 30, 4
	w := buildWorkloadFor(t, scenario.Redmine, approvals)
	intents := w.distinct + 1
	r := startRedmineRig(t)
	proxy := davtest.NewProxy(t, r.srv.URL)
	viaProxy := proxy.Rewrite(r.srv.URL)
	callsDir := t.TempDir()
	var procs []*process
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("exec-%d", i)
		// Calls wait for one of Redmine's few threads, four at a time from
		// each executor, with the patient timeout: on a busy machine a
		// shorter one times out call after call while Redmine still does
		// the work. A lost answer keeps its key's lock for the TTL, and
		// its key in doubt until the issue is found or the request
		// lifetime has passed: when the lost answer was not a 201 (seen in
		// CI: no issue for the key three minutes on), nothing lands and the
		// key waits the lifetime out, here 20 s rather than 5 minutes.
		procs = append(procs, r.executor(t, viaProxy, id, append(slices.Clone(patient), "--redmine-lock-ttl", patientLockTTL.String(),
			"--redmine-request-lifetime", "20s", "--concurrency", "4", "--max-deliver", "10",
			"--record-calls", filepath.Join(callsDir, id+".jsonl"))...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	awaitPullers(ctx, t, r.env, 2)
	// Lost answers to POSTs while the approvals are published.
	go func() {
		for range drops {
			proxy.DropResponsesTo(http.MethodPost, 1)
			time.Sleep(300 * time.Millisecond)
		}
	}()
	pub := publishSpread(ctx, r.env.JS, w.envelopes, 30*time.Millisecond)
	if err := <-pub.done; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	seqs := pub.sent()
	byseq := awaitReceipts(t, r.env, seqs, 3*time.Minute)
	// Stopped, each executor closes its record.
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	}
	v, err := checkCallRecords(callsDir, t.ArtifactDir())
	if err != nil {
		t.Fatal(err)
	}
	h := readCallRecords(t, callsDir)
	answered := answeredOutcomes(h)
	outcomes := map[string]int{}
	for _, seq := range seqs {
		if len(byseq[seq]) > 0 {
			outcomes[byseq[seq][0].Outcome]++
		}
	}
	received, created := r.srv.Posts()
	c := r.issues(t)
	t.Logf("%d messages, first receipts %v; calls answered %v; proxy lost %d answers; Redmine's log: %d POSTs, %d answered 201; %d issues listed; %s",
		len(seqs), outcomes, answered, proxy.Dropped(), received, created, c.total, v.res)
	if !v.res.OK {
		t.Errorf("the calls made under faults: %s; visualisation: %s", v.res, v.html)
	}
	if v.res.Intents != intents {
		t.Errorf("calls recorded for %d intents, want %d", v.res.Intents, intents)
	}
	if proxy.Dropped() == 0 || v.res.WithoutResponse == 0 {
		t.Errorf("%d answers lost, %d calls without response: the faults did not bite", proxy.Dropped(), v.res.WithoutResponse)
	}
	if answered[string(taskservice.Replayed)] == 0 || answered[string(taskservice.Conflict)] == 0 {
		t.Errorf("calls answered %v: want replays and conflicts among them", answered)
	}
	// What Redmine holds agrees: one issue per intent.
	if created != intents || c.total != intents || len(c.byIntent) != intents {
		t.Errorf("%d POSTs answered 201, %d issues listed for %d keys; want %d of each", created, c.total, len(c.byIntent), intents)
	}

	// One duplicate issue injected: the replay of an intent whose create
	// was answered, turned into the create of a second issue. The check
	// refuses it and names the intent.
	createdAnswered := map[string]bool{}
	for _, c := range h.Calls {
		if c.Answered && c.Outcome == string(taskservice.Created) {
			createdAnswered[c.IntentID] = true
		}
	}
	i := slices.IndexFunc(h.Calls, func(c history.Call) bool {
		return c.Answered && c.Outcome == string(taskservice.Replayed) && createdAnswered[c.IntentID]
	})
	if i < 0 {
		t.Fatal("no replayed call of an intent with an answered create, to turn into a second issue")
	}
	doubled := slices.Clone(h.Calls)
	doubled[i].Outcome, doubled[i].TaskID = string(taskservice.Created), redmine.TaskID(1_000_000)
	bad, err := linearize.Check(doubled, linearize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with call %s answered by a second issue %s for %s: %s", doubled[i].ID, doubled[i].TaskID, doubled[i].IntentID, bad)
	if bad.OK || len(bad.Violations) != 1 || !slices.Equal(bad.Violations[0].Intents, []string{doubled[i].IntentID}) {
		t.Errorf("the history with one duplicate issue: %s; want one violation naming %s", bad, doubled[i].IntentID)
	}
}

// redmineGate is the gate of an executor serving Redmine's default
// destination, with unsigned approvals allowed, as serve's would be.
func redmineGate() *gate.Checker {
	return &gate.Checker{AllowUnsigned: true, Serves: []gate.Destination{{Provider: document.ProviderRedmine, Name: document.DefaultDestination}}}
}

// redmineFlagsOf are the flags that point a command at srv; the API key
// comes from $REDMINE_API_KEY, which the caller sets.
func redmineFlagsOf(srv *redminetest.Server, field string) []string {
	return []string{"--task-service", "redmine", "--redmine-url", srv.URL, "--redmine-project", srv.Project, "--redmine-field", field}
}

// runRedmineVerify runs executor verify against env's pipeline and srv, and
// returns its report and error.
func runRedmineVerify(t *testing.T, env *testenv.Env, srv *redminetest.Server) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// With serve's lock TTL, shorter than verify's --timeout: verify takes no lock.
	args := append([]string{"verify", "--server", env.URL(), "--redmine-lock-ttl", "20s"}, redmineFlagsOf(srv, srv.FieldName)...)
	out, errOut, err := runCLI(ctx, args...)
	if strings.Contains(out+errOut, srv.APIKey) || err != nil && strings.Contains(err.Error(), srv.APIKey) {
		t.Errorf("verify shows the API key")
	}
	return out + errOut, err
}

// executor verify --task-service redmine audits the project's marked issues:
// after a clean run every check holds; a second issue carrying a key that
// has one is reported naming both issues; an issue carrying a key no
// receipt names is reported.
func TestVerifyOfARealRedmine(t *testing.T) {
	redminetest.Require(t)
	s := testenv.SeedFor(t, scenario.Redmine)
	srv := redminetest.Start(t, redminetest.Options{})
	env := testenv.Start(t)
	t.Setenv(service.RedmineAPIKeyEnv, srv.APIKey) // the executor process inherits it
	startExecutor(t, env.URL(), "exec-1", redmineFlagsOf(srv, srv.FieldName)...)

	var first *testenv.Receipt
	for i, e := range [][]byte{s.Original.Envelope(), s.Original.Envelope(), s.Changed.Envelope(), s.NewIntent.Envelope()} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sent, err := testenv.Publish(ctx, env.JS, e)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq)
		if i == 0 {
			first = rc
		}
	}
	if first.Outcome != document.OutcomeCreated || first.TaskID == nil {
		t.Fatalf("the first receipt: %+v, want created with an issue", first)
	}
	firstID := *first.TaskID

	report, err := runRedmineVerify(t, env, srv)
	t.Logf("executor verify --task-service redmine after a clean run:\n%s", report)
	if err != nil {
		t.Fatalf("verify failed after a clean run: %v", err)
	}
	expectLines(t, "the report", report,
		"Redmine project "+srv.Project+" at "+srv.URL+"/", "not applicable: Redmine keeps no call log",
		"n/a  4.", "ok   2.", "ok   3.", "ok   11.", "verify: all checks hold")

	// A second issue with the first one's key (its mark copied), made by
	// hand: the trace a lock holder stalled past its TTL would leave.
	var mark string
	for _, is := range srv.Issues(t) {
		if fmt.Sprint(is.ID) == firstID {
			mark = is.Mark
		}
	}
	if m, ok := parseMark(mark); !ok || m.scope != "default" || m.intent != "intent-0001" || !strings.HasPrefix(mark, redmine.TaggedMarkVersion+" ") {
		t.Fatalf("issue #%s carries the mark %q, not the key of %s", firstID, mark, "intent-0001")
	}
	second := srv.CreateIssue(t, "a second issue for the same key", mark)
	report, err = runRedmineVerify(t, env, srv)
	t.Logf("verify with a second issue for %s:\n%s", "intent-0001", violationLines(report))
	wantDup := fmt.Sprintf(`intent %q in scope "default" has 2 tasks in Redmine project %s at %s: task %s at issue #%s, task %d at issue #%d`,
		"intent-0001", srv.Project, srv.URL+"/", firstID, firstID, second, second)
	if !errors.Is(err, errSilent) || !strings.Contains(report, "FAIL 2.") || !strings.Contains(report, wantDup) {
		t.Errorf("verify with a second issue for one key: %v; want FAIL 2. and %q\n%s", err, wantDup, report)
	}
	srv.DeleteIssue(t, second)

	// An issue carrying a key that no receipt names.
	stray := srv.CreateIssue(t, "made outside the pipeline",
		redmine.Mark("", "intent-by-hand", "sha256:"+strings.Repeat("0", 64)))
	report, err = runRedmineVerify(t, env, srv)
	t.Logf("verify with an issue no receipt names:\n%s", violationLines(report))
	wantStray := fmt.Sprintf(`intent "intent-by-hand" in scope "default": task %d at issue #%d exists, but no created or replayed receipt names it`, stray, stray)
	if !errors.Is(err, errSilent) || !strings.Contains(report, "FAIL 3.") || !strings.Contains(report, wantStray) {
		t.Errorf("verify with an issue no receipt names: %v; want FAIL 3. and %q\n%s", err, wantStray, report)
	}
}
