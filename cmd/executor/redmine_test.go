package main

// The pipeline against a real Redmine: executor processes started with
// --task-service redmine, the JetStream pipeline of testenv, and a private
// Redmine started for each test by redminetest. Redmine keeps no key: every
// POST /issues.json makes an issue, so what the tests assert about it is
// read from Redmine itself: the POSTs received and answered 201 from its
// own request log (Posts), the issues from its REST listing (Issues) and
// the mark each carries ("st1 <scope> <escaped intent id> <digest>"), never
// from the adapter's counters. Redmine keeps no counters, so the receipts'
// counts are null.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// redmineRig is the pipeline with a private Redmine as its task service.
type redmineRig struct {
	env *testenv.Env
	srv *redminetest.Server
	// keyFile holds the API key, for --redmine-api-key-file.
	keyFile string
	// locks is the intent ledger on env, which holds the per-key locks.
	locks *ledger.Ledger
	// ad reaches Redmine directly (not through a proxy), for the store id
	// receipts carry and for in-process executors.
	ad *redmine.Adapter
}

// redmineTestTTL is the per-key lock's lifetime in the tests that wait for
// it to run out: longer than their call timeouts (1 s to 3 s), with room
// for a POST that Redmine, busy on a shared machine, takes late.
const redmineTestTTL = 4 * time.Second

// patient are the executor flags of the tests that wait for no TTL: calls
// long enough for a busy Redmine.
var patient = []string{"--call-timeout", "10s", "--ack-wait", "20s"}

// patientLockTTL is the per-key lock's lifetime with the patient call
// timeout, which it must exceed, in the tests whose faults leave a lock to
// run out.
const patientLockTTL = 12 * time.Second

// startRedmineRig starts a private Redmine and the JetStream pipeline, with
// the intent ledger's bucket provisioned.
func startRedmineRig(t *testing.T) *redmineRig {
	t.Helper()
	redminetest.Require(t)
	srv := redminetest.Start(t, redminetest.Options{})
	env := testenv.Start(t)
	keyFile := writeTestFile(t, "redmine-api-key", srv.APIKey+"\n")
	r := &redmineRig{env: env, srv: srv, keyFile: keyFile, locks: testenv.Ledger(t, env.JS, ledger.Options{})}
	r.ad = r.adapter(t, srv.URL, 3*time.Second)
	return r
}

// adapter is an adapter of the rig's project at baseURL (Redmine's, or a
// proxy's in front of it), with the rig's locks and the tests' short TTL;
// each HTTP exchange takes at most timeout, or, when timeout is zero, as
// long as its caller's deadline allows.
func (r *redmineRig) adapter(t *testing.T, baseURL string, timeout time.Duration) *redmine.Adapter {
	t.Helper()
	cfg := redmine.Config{URL: baseURL, APIKey: r.srv.APIKey, Project: r.srv.Project, Field: r.srv.FieldName,
		Locks: r.locks, LockTTL: redmineTestTTL, Timeout: timeout}
	if timeout == 0 {
		cfg.HTTPClient = &http.Client{}
	}
	a, err := redmine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Check(ctx); err != nil {
		t.Fatalf("the adapter's check of %s: %v", baseURL, err)
	}
	return a
}

// redmineFlags are the executor's flags for the rig's project at baseURL.
func (r *redmineRig) redmineFlags(baseURL string) []string {
	return []string{"--task-service", "redmine", "--redmine-url", baseURL, "--redmine-project", r.srv.Project,
		"--redmine-field", r.srv.FieldName, "--redmine-api-key-file", r.keyFile}
}

// executor starts an executor process whose task service is the rig's
// project at baseURL (Redmine's, or a proxy's in front of it).
func (r *redmineRig) executor(t *testing.T, baseURL, id string, extra ...string) *process {
	t.Helper()
	return startExecutor(t, r.env.URL(), id, append(r.redmineFlags(baseURL), extra...)...)
}

// store is the store id receipts of the rig's project carry.
func (r *redmineRig) store() string { return r.ad.StoreID() }

// mark is an issue's mark, read back.
type mark struct {
	scope, intent, digest string
}

// parseMark reads an issue's mark, of either version (redmine.ParseMark).
func parseMark(v string) (mark, bool) {
	scope, intent, digest, ok := redmine.ParseMark(v)
	return mark{scope: scope, intent: intent, digest: digest}, ok
}

// issueCount is what the REST listing of the project shows.
type issueCount struct {
	// total counts every issue of the project, marked or not.
	total int
	// byIntent lists the ids of the issues whose mark names an intent.
	byIntent map[string][]int
}

// issues reads the project's issues, open and closed, from Redmine's REST
// listing, and groups them by the intent their mark names.
func (r *redmineRig) issues(t *testing.T) issueCount {
	t.Helper()
	c := issueCount{byIntent: map[string][]int{}}
	for _, is := range r.srv.Issues(t) {
		c.total++
		if m, ok := parseMark(is.Mark); ok {
			c.byIntent[m.intent] = append(c.byIntent[m.intent], is.ID)
		}
	}
	return c
}

// duplicates counts the issues beyond the first of each intent in intents.
func (c issueCount) duplicates(intents []string) int {
	n := 0
	for _, intent := range intents {
		n += max(len(c.byIntent[intent])-1, 0)
	}
	return n
}

// issueJSON reads one issue as Redmine's REST API shows it, everything
// included (its custom fields, its journals), for a byte-for-byte
// comparison.
func (r *redmineRig) issueJSON(t *testing.T, id int) []byte {
	t.Helper()
	code, b := r.srv.Do(t, http.MethodGet, fmt.Sprintf("/issues/%d.json?include=journals", id), nil)
	if code != http.StatusOK {
		t.Fatalf("reading issue %d: %d %s", id, code, b)
	}
	return b
}

// verifyRedmine runs executor verify against the rig's pipeline and project
// and returns its report and error.
func verifyRedmine(t *testing.T, r *redmineRig) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"verify", "--server", r.env.URL()}, r.redmineFlags(r.srv.URL)...)
	err := run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestRedmineTheSeedsStoryCreatesOneIssueAndReplaysIt(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	r.executor(t, r.srv.URL, "exec-1", patient...)
	first := sendByProcess(t, r.env.URL(), s.Original.Envelope())
	second := sendByProcess(t, r.env.URL(), s.Original.Envelope())
	checkServiceReceipt(t, "first receipt", first, document.OutcomeCreated, "", r.store())
	checkServiceReceipt(t, "second receipt", second, document.OutcomeReplayed, ptr(first.TaskID), r.store())

	received, created := r.srv.Posts()
	c := r.issues(t)
	ids := c.byIntent["intent-0001"]
	t.Logf("two publisher processes: %s %s, then %s %s; Redmine's log: %d POST /issues.json received, %d answered 201; %d issues listed, intent-0001's %v",
		first.Outcome, ptr(first.TaskID), second.Outcome, ptr(second.TaskID), received, created, c.total, ids)
	if received != 1 || created != 1 {
		t.Errorf("Redmine's log shows %d POST /issues.json and %d answered 201, want one of each", received, created)
	}
	if c.total != 1 || len(ids) != 1 {
		t.Fatalf("%d issues listed, %d carry intent-0001's key; want one", c.total, len(ids))
	}
	if want := redmine.TaskID(ids[0]); ptr(first.TaskID) != want {
		t.Errorf("the receipts name task %s, the issue carrying the key is %s", ptr(first.TaskID), want)
	}
}

func TestRedmineAChangedRequestUnderTheSameKeyConflictsAndChangesNothing(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	r.executor(t, r.srv.URL, "exec-1", patient...)
	created := sendAndWait(t, r.env, s.Original.Envelope())
	checkServiceReceipt(t, "the original", created.Receipt, document.OutcomeCreated, "", r.store())
	ids := r.issues(t).byIntent["intent-0001"]
	if len(ids) != 1 {
		t.Fatalf("after the create intent-0001 has issues %v, want one", ids)
	}
	before := r.issueJSON(t, ids[0])

	changed := sendAndWait(t, r.env, s.Changed.Envelope())
	checkServiceReceipt(t, "the changed request", changed.Receipt, document.OutcomeConflict, ptr(created.TaskID), r.store())
	after := r.issueJSON(t, ids[0])
	received, posted := r.srv.Posts()
	c := r.issues(t)
	t.Logf("changed request: %s %s; Redmine's log: %d POSTs, %d answered 201; %d issues listed", changed.Outcome, ptr(changed.TaskID), received, posted, c.total)
	if !bytes.Equal(before, after) {
		t.Errorf("the conflict changed issue %d:\nbefore: %s\nafter:  %s", ids[0], before, after)
	}
	if received != 1 || posted != 1 || c.total != 1 {
		t.Errorf("%d POSTs, %d answered 201, %d issues listed; want 1, 1, 1", received, posted, c.total)
	}
}

func TestRedmineSixtyFourDeliveriesAcrossThreeExecutorsMakeOneIssue(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	const copies = 64
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	// Each instance takes at most 22 deliveries at once, so that all three
	// share the 64; the deliveries that find the key locked wait for it
	// within their call.
	for i := 1; i <= 3; i++ {
		r.executor(t, r.srv.URL, fmt.Sprintf("exec-%d", i), "--call-timeout", "15s", "--ack-wait", "30s", "--concurrency", "22", "--max-deliver", "8")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	awaitPullers(ctx, t, r.env, 3)
	seqs := publishCopies(ctx, t, r.env.JS, s.Original.Envelope(), copies)
	byseq := awaitReceipts(t, r.env, seqs, 90*time.Second)
	outcomes, executors := map[string]int{}, map[string]int{}
	for _, seq := range seqs {
		if len(byseq[seq]) == 0 {
			t.Errorf("message %d has no receipt (a dead letter)", seq)
			continue
		}
		rc := byseq[seq][0]
		outcomes[rc.Outcome]++
		executors[rc.Delivery.Executor]++
		if rc.Outcome == document.OutcomeCreated || rc.Outcome == document.OutcomeReplayed {
			checkServiceReceipt(t, fmt.Sprintf("message %d", seq), rc, rc.Outcome, "", r.store())
		}
	}
	received, created := r.srv.Posts()
	c := r.issues(t)
	t.Logf("%d deliveries: receipts %v by executor %v; Redmine's log: %d POSTs, %d answered 201; %d issues listed, intent-0001's %v",
		copies, outcomes, executors, received, created, c.total, c.byIntent["intent-0001"])
	if created != 1 || c.total != 1 || len(c.byIntent["intent-0001"]) != 1 {
		t.Fatalf("%d POSTs answered 201, %d issues listed (%d with the key); want exactly one", created, c.total, len(c.byIntent["intent-0001"]))
	}
	if outcomes[document.OutcomeCreated] != 1 || outcomes[document.OutcomeReplayed] != copies-1 {
		t.Errorf("receipts %v, want 1 created and %d replayed", outcomes, copies-1)
	}
	if len(executors) < 2 {
		t.Errorf("only %v handled the deliveries; the consumer was not shared", executors)
	}
}

func TestRedmineALostReplyIsReplayedOnTheRedelivery(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	proxy := davtest.NewProxy(t, r.srv.URL)
	viaProxy := proxy.Rewrite(r.srv.URL)
	// The POST whose answer is lost keeps its lock until the TTL runs out
	// (it may still land); the budget outlasts it.
	r.executor(t, viaProxy, "exec-1", "--call-timeout", "3s", "--ack-wait", "6s", "--redmine-lock-ttl", redmineTestTTL.String(), "--max-deliver", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	awaitPullers(ctx, t, r.env, 1)
	proxy.DropResponsesTo(http.MethodPost, 1)
	rc := sendAndWait(t, r.env, s.Original.Envelope())
	received, created := r.srv.Posts()
	c := r.issues(t)
	t.Logf("%d answers dropped by the proxy; receipt %s %s on delivery %d; Redmine's log: %d POSTs, %d answered 201; %d issues listed",
		proxy.Dropped(), rc.Outcome, ptr(rc.TaskID), rc.Delivery.Delivered, received, created, c.total)
	// The store id names the project at the URL the executor was given.
	checkServiceReceipt(t, "the receipt", rc.Receipt, document.OutcomeReplayed, "", r.adapter(t, viaProxy, time.Second).StoreID())
	if rc.Delivery.Delivered < 2 {
		t.Errorf("the replay came on delivery %d, want a redelivery", rc.Delivery.Delivered)
	}
	if proxy.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d answers, want the POST's", proxy.Dropped())
	}
	ids := c.byIntent["intent-0001"]
	if received != 1 || created != 1 || c.total != 1 || len(ids) != 1 {
		t.Fatalf("%d POSTs, %d answered 201, %d issues listed (%v with the key); want one of each", received, created, c.total, ids)
	}
	if want := redmine.TaskID(ids[0]); ptr(rc.TaskID) != want {
		t.Errorf("the replay names %s, the issue is %s", ptr(rc.TaskID), want)
	}
}

// The redmine flags as the commands take them; the flags' own checks are
// cmd/internal/service's tests.

// redmineKey stands for a Redmine API key; no output of a command may show
// it.
const redmineKey = "REDMINE-KEY-7d31e0"

const redmineURL = "http://127.0.0.1:1/"

// redmineArgs are the flags of a well-formed redmine service.
var redmineArgs = []string{"--task-service", "redmine", "--redmine-url", redmineURL, "--redmine-project", "ops"}

// The commands refuse what the flags refuse, as usage errors, and never
// show the API key: not in an error, not on stdout or stderr, not in --help.
func TestRedmineFlagsInTheCommandsShowNoKey(t *testing.T) {
	t.Setenv(service.RedmineAPIKeyEnv, redmineKey)
	keyFile := writeTestFile(t, "key", redmineKey)
	for _, c := range []struct {
		name string
		args []string
		exit int
		says string
	}{
		{"serve refuses a lock TTL not longer than --call-timeout, naming both",
			append([]string{"serve", "--check-config", "--insecure-allow-unsigned", "--call-timeout", "10s", "--redmine-lock-ttl", "10s"}, redmineArgs...),
			2, "--redmine-lock-ttl 10s is not longer than the call timeout 10s"},
		{"serve --check-config takes the key from a file",
			append([]string{"serve", "--check-config", "--insecure-allow-unsigned", "--redmine-api-key-file", keyFile}, redmineArgs...), 0, ""},
		{"serve refuses --redmine-url with the fake service",
			[]string{"serve", "--check-config", "--insecure-allow-unsigned", "--redmine-url", redmineURL}, 2, "need --task-service redmine"},
		{"probe refuses redmine without a project",
			[]string{"probe", "--task-service", "redmine", "--redmine-url", redmineURL, "--yes"}, 2, "needs --redmine-project"},
		{"probe refuses --embedded with redmine",
			append([]string{"probe", "--embedded", "--yes"}, redmineArgs...), 2, "--embedded"},
		{"demo refuses redmine and says why",
			append([]string{"demo"}, redmineArgs...), 2, "intent ledger"},
		{"verify against a NATS server that does not answer fails without the key",
			append([]string{"verify", "--server", "nats://127.0.0.1:1", "--timeout", "2s"}, redmineArgs...), 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if exitCode(err) != c.exit {
				t.Fatalf("%v ended with %v (exit %d), want exit %d\n%s%s", c.args, err, exitCode(err), c.exit, out.String(), errOut.String())
			}
			if c.says != "" && !strings.Contains(err.Error(), c.says) {
				t.Errorf("the error %q lacks %q", err, c.says)
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if strings.Contains(msg+out.String()+errOut.String(), redmineKey) {
				t.Errorf("%v shows the API key:\n%s\n%s%s", c.args, msg, out.String(), errOut.String())
			}
		})
	}
	for _, cmd := range []string{"serve", "probe", "verify"} {
		t.Run(cmd+" --help lists the redmine flags and shows no key", func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{cmd, "--help"}, &out, &errOut)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%s --help: %v", cmd, err)
			}
			help := out.String() + errOut.String()
			for _, want := range []string{"redmine", "-redmine-url", "-redmine-project", "-redmine-field", "-redmine-api-key-file", "$" + service.RedmineAPIKeyEnv, "-redmine-lock-ttl"} {
				if !strings.Contains(help, want) {
					t.Errorf("%s --help lacks %q", cmd, want)
				}
			}
			if strings.Contains(help, redmineKey) {
				t.Errorf("%s --help shows the API key", cmd)
			}
		})
	}
	t.Run("the usage names redmine", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "redmine (with --redmine-url") {
			t.Errorf("usage lacks redmine:\n%s", out.String())
		}
	})
}

// executor serve reads Redmine once before it consumes: a project whose
// issues have no key field (here: --redmine-field names none) stops it,
// saying how an administrator makes the field, and takes no message; a
// wrong API key stops it with Redmine's 401.
func TestServeRefusesARedmineWithoutTheKeyField(t *testing.T) {
	redminetest.Require(t)
	s := testenv.SeedFor(t, scenario.Redmine)
	srv := redminetest.Start(t, redminetest.Options{})
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The approval waits in the stream while the executors are refused.
	if _, err := testenv.Publish(ctx, env.JS, s.Original.Envelope()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, field, key string
		says             []string
	}{
		{"a field that does not exist", "no such field", srv.APIKey,
			[]string{"refuses this executor", `--redmine-field "no such field"`, "Custom fields", "For all projects", "Used as a filter"}},
		{"a wrong API key", srv.FieldName, "not-the-key-" + redmineKey, []string{"refuses this executor", "401", "the API key"}},
	} {
		t.Run("serve with "+c.name+" exits 1 saying why and takes no message", func(t *testing.T) {
			t.Setenv(service.RedmineAPIKeyEnv, c.key)
			p := startExecutor(t, env.URL(), "exec-refused", "--task-service", "redmine", "--redmine-url", srv.URL,
				"--redmine-project", srv.Project, "--redmine-field", c.field)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve is still running:\n%s", p.out.String())
			}
			out := p.out.String()
			t.Logf("serve with %s:\n%s", c.name, out)
			if p.err == nil {
				t.Fatalf("serve exited 0:\n%s", out)
			}
			for _, want := range c.says {
				if !strings.Contains(out, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, c.key) {
				t.Errorf("the API key is in serve's output:\n%s", out)
			}
			if received, _ := srv.Posts(); received != 0 {
				t.Errorf("the refused executor sent %d POSTs", received)
			}
		})
	}
	ci, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ci.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 0 {
		t.Errorf("the refused executors took %d deliveries", info.Delivered.Consumer)
	}
}

// redmineProbeArgs are probe's flags for srv, with the API key from a file.
func redmineProbeArgs(t *testing.T, srv *redminetest.Server, extra ...string) []string {
	t.Helper()
	key := writeTestFile(t, "redmine-api-key", srv.APIKey+"\n")
	return append([]string{"--task-service", "redmine", "--redmine-url", srv.URL, "--redmine-project", srv.Project,
		"--redmine-field", srv.FieldName, "--redmine-api-key-file", key}, extra...)
}

// executor probe against a real Redmine: the adapter's rows are safe, the
// class is stated, a lookup right after a create sees it, and two plain
// creates with one key make two issues, as Redmine's own log and listing
// count them.
func TestProbeOfARealRedmine(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	redminetest.Require(t)
	srv := redminetest.Start(t, redminetest.Options{})
	// The lost-reply row waits for the lost call's lock to run out: a TTL
	// just over the probe's 10 s call timeout keeps the wait short.
	out, errOut, err := runProbeCmd(t, redmineProbeArgs(t, srv, "--redmine-lock-ttl", "11s", "--yes", "--json")...)
	if err != nil {
		t.Fatalf("probe --task-service redmine: %v\n%s%s", err, out, errOut)
	}
	if strings.Contains(out+errOut, srv.APIKey) {
		t.Errorf("probe shows the API key:\n%s%s", out, errOut)
	}
	var rep probe.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("probe --json printed %q: %v", out, err)
	}
	var text bytes.Buffer
	if err := probe.WriteText(&text, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("executor probe --task-service redmine:\n%s", text.String())
	rows := map[string]probe.Row{}
	for _, r := range rep.Rows {
		rows[r.ID] = r
	}
	for _, c := range []struct {
		row    string
		status probe.Status
		answer string
		seen   string
	}{
		{probe.RowRetry, probe.Safe, "first result", "1 task for the intent"},
		{probe.RowConflict, probe.Safe, "conflict, first kept", "1 task for the intent"},
		{probe.RowConcurrent, probe.Safe, "1 create", "16 calls at once: 1 created, 15 replayed"},
		{probe.RowLostReply, probe.Safe, "replayed", "1 task for the intent"},
		{probe.RowAfterDelete, probe.Safe, "yes", "(task deleted); 0 tasks for the intent"},
		{probe.RowScope, probe.Safe, "", "every answer came from store redmine-"},
		{probe.RowReadAfterWrite, probe.Safe, "seen at once", "the lookup right after it found"},
		{probe.RowNaive, probe.Info, "2 tasks", "2 tasks for the intent; deleted again, 0 tasks left"},
	} {
		t.Run("the row "+c.row+" answers "+string(c.status), func(t *testing.T) {
			r, ok := rows[c.row]
			if !ok {
				t.Fatalf("no row %s in %+v", c.row, rep.Rows)
			}
			if r.Status != c.status || c.answer != "" && r.Answer != c.answer || !strings.Contains(r.Seen, c.seen) {
				t.Errorf("row %s: %s %q, saw %q; want %s %q, seeing %q", c.row, r.Status, r.Answer, r.Seen, c.status, c.answer, c.seen)
			}
		})
	}
	if rep.Class != service.ClassNoKey || !rep.Verdict.Safe {
		t.Errorf("class %q, verdict %q; want %q and safe", rep.Class, rep.Verdict.Summary, service.ClassNoKey)
	}
	// Redmine's own log: one POST answered 201 per issue created. The
	// adapter's six creating rows made one issue each (the one after a
	// deletion was deleted), and the naive row two.
	received, created := srv.Posts()
	if created != 8 || received != created {
		t.Errorf("Redmine's log shows %d POSTs of issues, %d answered 201; want 8 and 8", received, created)
	}
	// The cleanup deleted the issue of each of the adapter's five rows
	// whose issue was left, and Redmine lists none of the run's.
	if c := rep.Cleanup; c.Kept || c.Deleted != 5 || c.Left != 0 || len(c.Failed) != 0 {
		t.Errorf("cleanup %+v, want 5 issues deleted and none left", c)
	}
	perIntent := map[string]int{}
	for _, is := range srv.Issues(t) {
		perIntent[redmineIssueIntent(is.Mark)]++
	}
	for _, r := range rep.Rows {
		if n := perIntent[r.IntentID]; r.IntentID != "" && n != 0 {
			t.Errorf("Redmine lists %d issues for the intent of row %s after the probe, want 0 (deleted)", n, r.ID)
		}
	}
}

// redmineIssueIntent is the intent id a mark names, or "".
func redmineIssueIntent(v string) string {
	m, _ := parseMark(v)
	return m.intent
}
