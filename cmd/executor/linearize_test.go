package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/internal/linearize"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

// originalIntent is the intent id of the seed scenario's original approval.
const originalIntent = "intent-0001"

// wrongTaskOnReplay is an injected bug: the service's replays name another
// task than the first.
func wrongTaskOnReplay(svc taskservice.Service) taskservice.Service {
	return taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		res, err := svc.Create(ctx, req)
		if err == nil && res.Outcome == taskservice.Replayed {
			res.TaskID += "-wrong"
		}
		return res, err
	})
}

// TestTheLinearizabilityCheckFailsAndNamesTheIntentWhenTheServiceBreaksTheContract
// runs the real pipeline (embedded NATS, the task service over Pebble, an
// executor) with every call recorded at the contract, sends the seed
// approval twice and a second intent once, and checks the history.
func TestTheLinearizabilityCheckFailsAndNamesTheIntentWhenTheServiceBreaksTheContract(t *testing.T) {
	tests := []struct {
		name   string
		unsafe bool
		bug    func(taskservice.Service) taskservice.Service
		ok     bool
	}{
		{name: "the fake service as it is passes", ok: true},
		{name: "a service that creates on every call fails naming the intent", unsafe: true},
		{name: "a service that replays with a wrong task id fails naming the intent", bug: wrongTaskOnReplay},
	}
	s := testenv.Seed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.StartWith(t, embedded.StackOptions{UnsafeCreateEveryCall: tt.unsafe})
			path := filepath.Join(t.TempDir(), "calls-exec-1.jsonl")
			rec, err := history.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rec.Close() })
			var svc taskservice.Service = env.Service.TaskService()
			if tt.bug != nil {
				svc = tt.bug(svc)
			}
			env.Executor(executor.Config{ID: "exec-1", TaskService: rec.Wrap(svc)})
			for _, e := range [][]byte{s.Original.Envelope(), s.Original.Envelope(), s.NewIntent.Envelope()} {
				if _, err := demo.SendAndWait(context.Background(), env.JS, e, 30*time.Second); err != nil {
					t.Fatalf("sending: %v", err)
				}
			}
			if err := rec.Err(); err != nil {
				t.Fatal(err)
			}
			html := filepath.Join(t.ArtifactDir(), "linearizability.html")
			res, err := linearize.CheckFiles(linearize.Options{Visualization: html}, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if res.Operations != 3 || res.Intents != 2 {
				t.Fatalf("%d operations on %d intents recorded, want 3 on 2", res.Operations, res.Intents)
			}
			if tt.ok {
				if !res.OK {
					t.Fatalf("the check failed: %s", res)
				}
				return
			}
			if res.OK {
				t.Fatal("the check passed a service that breaks the contract")
			}
			if len(res.Violations) != 1 || strings.Join(res.Violations[0].Intents, ",") != originalIntent ||
				!strings.Contains(res.String(), `intent "`+originalIntent+`"`) {
				t.Fatalf("violations %v, want one naming %s", res.Violations, originalIntent)
			}
			b, err := os.ReadFile(html)
			if err != nil || !strings.Contains(string(b), originalIntent) {
				t.Fatalf("the visualisation %s does not name the intent (err %v)", html, err)
			}
		})
	}
}

// TestTheChaosRunsCheckLeavesAVisualisationNamedAfterTheIntent feeds the
// chaos test's check records of a service that creates on every call.
func TestTheChaosRunsCheckLeavesAVisualisationNamedAfterTheIntent(t *testing.T) {
	callsDir, artifacts := t.TempDir(), t.TempDir()
	tasks := 0
	createsEveryCall := taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		tasks++
		return taskservice.Result{Outcome: taskservice.Created, TaskID: fmt.Sprintf("task-%d", tasks)}, nil
	})
	for p, intents := range [][]string{{"intent-a", "intent-b"}, {"intent-b"}} {
		rec, err := history.Open(filepath.Join(callsDir, fmt.Sprintf("exec-%d-001.jsonl", p+1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range intents {
			req := taskservice.Request{IntentID: id, RequestDigest: "sha256:" + strings.Repeat("1", 64), CallRef: "APPROVALS:1:1:1"}
			if _, err := rec.Wrap(createsEveryCall).Create(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := checkCallRecords(callsDir, artifacts)
	if err != nil {
		t.Fatal(err)
	}
	if v.res.OK || v.files != 2 || v.sessions != 2 || !strings.Contains(v.res.String(), `intent "intent-b"`) {
		t.Fatalf("files %d, sessions %d: %s", v.files, v.sessions, v.res)
	}
	if want := filepath.Join(artifacts, "linearizability-intent-b.html"); v.html != want {
		t.Fatalf("visualisation %q, want %q", v.html, want)
	}
	if _, err := os.Stat(v.html); err != nil {
		t.Fatal(err)
	}
}

// The linearizability check of the chaos test, on the CalDAV task service:
// executor processes with --task-service caldav and --record-calls, against
// Radicale and Xandikos, through a proxy that loses and stalls replies,
// while the test kills executors, they kill themselves after calls, and the
// server restarts. The records are checked with the model the chaos test
// uses for the fake service: the history is recorded at the task-service
// contract, so the one model checks every adapter.

// calDAVLinearizeApprovals is the size of the workload (the chaos test's
// mix) each server gets: a few hundred calls.
const calDAVLinearizeApprovals = 200

// davFaults counts the faults a run injected.
type davFaults struct {
	dropArmed, stallArmed, killed int
}

func TestCalDAVCallsUnderFaultsAreLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs executor processes against each CalDAV server under faults")
	}
	// The chaos test's mix: distinct approvals, resends of them, changed
	// requests under the same intent ids, and poison messages the gate
	// rejects before any call. Its first approval kills its executors only
	// with a fault these executors do not carry; here it is one more
	// intent.
	w := buildWorkloadFor(t, scenario.CalDAV, calDAVLinearizeApprovals)
	intents := w.distinct + 1
	for _, k := range davtest.Kinds() {
		t.Run(fmt.Sprintf("on %s the calls of three executor processes, through lost and stalled replies, killed executors and a server restart, are linearizable", k), func(t *testing.T) {
			r := startDAVRig(t, k)
			proxy := davtest.NewProxy(t, r.srv.BaseURL)
			viaProxy := proxy.Rewrite(r.srv.CollectionURL)
			callsDir := t.TempDir()
			var executors []*supervised
			for i := 1; i <= 3; i++ {
				id := fmt.Sprintf("exec-%d", i)
				var launches atomic.Int64
				executors = append(executors, supervise(t, id, func() *exec.Cmd {
					calls := filepath.Join(callsDir, fmt.Sprintf("%s-%03d.jsonl", id, launches.Add(1)))
					// Calls may wait for Radicale's listen backlog (a SYN
					// sent again after 1 s, then 2 s more), so the call
					// timeout is above 3 s; a stalled reply takes that
					// long. The budget outlasts the server's restart:
					// redeliveries come after 1 s, 2 s, 4 s, ….
					cmd := exec.Command(os.Args[0], "serve", "--server", r.env.URL(), "--insecure-allow-unsigned", "--id", id,
						"--ack-wait", "2s", "--max-deliver", "20", "--call-timeout", "4s", "--concurrency", "4", "--log-level", "warn",
						"--task-service", "caldav", "--caldav-url", viaProxy, "--record-calls", calls,
						"--fault", "after-call:kill:0.01")
					cmd.Env = append(os.Environ(), asMain+"=1", "GORACE=atexit_sleep_ms=0")
					return cmd
				}))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r.awaitPullers(ctx, t, 3)
			start := time.Now()

			// Faults every 150 ms while the approvals are published: the
			// proxy loses the next reply (the server handled the request)
			// or holds it past the call timeout, or an executor is killed
			// (SIGKILL) and started again with a new call record.
			var f davFaults
			rnd := rand.New(rand.NewPCG(5, 6))
			stopFaults := everyTick(150*time.Millisecond, func(int) {
				switch n := rnd.IntN(10); {
				case n < 6:
					proxy.DropResponses(1)
					f.dropArmed++
				case n == 6 && f.stallArmed < 3:
					proxy.StallResponses(1)
					f.stallArmed++
				case n == 7 && f.killed < 3:
					executors[rnd.IntN(len(executors))].signal(syscall.SIGKILL)
					f.killed++
				}
			})

			// Publish over about 6 s; the server restarts when half the
			// messages are in.
			pub := publishSpread(ctx, r.env.JS, w.envelopes, 30*time.Millisecond)
			for len(pub.sent()) < len(w.envelopes)/2 {
				time.Sleep(20 * time.Millisecond)
			}
			r.srv.Restart()
			if err := <-pub.done; err != nil {
				t.Fatalf("publishing: %v", err)
			}
			stopFaults()
			seqs := pub.sent()
			byseq := awaitReceipts(t, r.env, seqs, 90*time.Second)
			took := time.Since(start)
			// Stopped, each executor closes its record.
			restarts := 0
			for _, e := range executors {
				e.stop(syscall.SIGTERM)
				restarts += int(e.restarts.Load())
			}

			v, err := checkCallRecords(callsDir, t.ArtifactDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", k, v.res)
			h := readCallRecords(t, callsDir)
			answered := answeredOutcomes(h)
			dead, err := audit.DeadLetterSeqs(ctx, r.env.JS)
			if err != nil {
				t.Fatal(err)
			}
			outcomes := map[string]int{}
			for _, seq := range seqs {
				outcomes[byseq[seq][0].Outcome]++
			}
			l := r.listing(t)
			created := 0
			for _, e := range r.srv.LogEntries() {
				if e.Method == "PUT" && e.Status == 201 && strings.HasPrefix(e.Path, r.srv.CollectionPath) {
					created++
				}
			}
			t.Logf("%s: %d messages finished in %s, first receipts %v, %d dead letters; calls answered %v; "+
				"proxy lost %d replies (%d armed), stalled up to %d; executors killed %d by the test, %d processes started again (%d sessions, %d torn lines); "+
				"server restarted once; %d PUTs answered 201, %d VTODOs listed",
				k, len(seqs), took.Round(time.Millisecond), outcomes, len(dead), answered,
				proxy.Dropped(), f.dropArmed, f.stallArmed, f.killed, restarts, v.sessions, v.torn, created, l.VTODOs)

			if !v.res.OK {
				t.Errorf("the calls made under faults: %s; visualisation: %s", v.res, v.html)
			}
			if v.res.Intents != intents {
				t.Errorf("calls recorded for %d intents, want %d: every approval that passes the gate reaches the server", v.res.Intents, intents)
			}
			if v.res.Operations <= len(seqs) || v.res.WithoutResponse == 0 || proxy.Dropped() == 0 {
				t.Errorf("%d calls for %d messages, %d without response, %d replies lost: the faults did not bite",
					v.res.Operations, len(seqs), v.res.WithoutResponse, proxy.Dropped())
			}
			if answered[string(taskservice.Replayed)] == 0 || answered[string(taskservice.Conflict)] == 0 {
				t.Errorf("calls answered %v: want replays and conflicts among them", answered)
			}
			if v.sessions <= len(executors) {
				t.Errorf("%d executor sessions recorded calls: no executor was killed and started again", v.sessions)
			}
			if len(dead) != 0 {
				t.Errorf("%d messages were dead-lettered: %v", len(dead), dead)
			}
			// The same records with one replay's task id changed are not
			// linearizable, and the check names the intent.
			if i := slices.IndexFunc(h.Calls, func(c history.Call) bool { return c.Answered && c.Outcome == string(taskservice.Replayed) }); i >= 0 {
				tampered := slices.Clone(h.Calls)
				tampered[i].TaskID += "-other"
				bad, err := linearize.Check(tampered, linearize.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: with the replay of call %s naming task %s: %s", k, tampered[i].ID, tampered[i].TaskID, bad)
				if bad.OK || len(bad.Violations) != 1 || !slices.Equal(bad.Violations[0].Intents, []string{tampered[i].IntentID}) {
					t.Errorf("the records with one replay's task id changed: %s; want one violation naming %s", bad, tampered[i].IntentID)
				}
			}
			// What the server holds agrees: one create per intent, one
			// VTODO per intent.
			if created != intents || l.VTODOs != intents || len(r.srv.StoredNames()) != intents {
				t.Errorf("%d PUTs answered 201, %d VTODOs listed, %d stored; want %d of each", created, l.VTODOs, len(r.srv.StoredNames()), intents)
			}
		})
	}
}

// The model's delete on a real server: an executor process serves a CalDAV
// collection with its intent ledger and records its calls; the owner's
// delete of a task is recorded beside them. The resend after the delete is
// replayed with the deleted mark, and the records are linearizable; the
// same records with that replay turned into a create (a task made again),
// or without the delete, are not.
func TestCalDAVDeletesAreLinearizable(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" a task deleted by its owner and then sent again is a linearizable replay marked deleted", func(t *testing.T) {
			r := startDAVRig(t, k)
			callsDir := t.TempDir()
			r.executor(t, r.srv.CollectionURL, "exec-1", "--record-calls", filepath.Join(callsDir, "exec-1.jsonl"))
			r.send(t, s.Original.Envelope())
			r.send(t, s.NewIntent.Envelope())

			rec, err := history.Open(filepath.Join(callsDir, "owner.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rec.WrapDelete(r.dav.Delete)(ctx, "intent-0001"); err != nil {
				t.Fatalf("the owner's delete: %v", err)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			again := r.send(t, s.Original.Envelope())
			checkServiceReceipt(t, "the resend after the delete", again.Receipt, "replayed", r.taskID("intent-0001"), r.dav.StoreID())
			r.send(t, s.Changed.Envelope())
			r.send(t, s.NewIntent.Envelope())

			h := readCallRecords(t, callsDir)
			marked := slices.IndexFunc(h.Calls, func(c history.Call) bool { return c.Answered && c.TaskDeleted })
			if marked < 0 {
				t.Fatalf("no recorded call was replayed with the deleted mark: %+v", h.Calls)
			}
			res, err := linearize.Check(h.Calls, linearize.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", k, res)
			if !res.OK || res.Operations != 6 {
				t.Errorf("the records: %s; want 6 linearizable operations (5 creates, one a conflict, and 1 delete)", res)
			}

			recreated := slices.Clone(h.Calls)
			recreated[marked].Outcome, recreated[marked].TaskDeleted = string(taskservice.Created), false
			withoutDelete := slices.DeleteFunc(slices.Clone(h.Calls), func(c history.Call) bool { return c.Op == history.OpDelete })
			for name, calls := range map[string][]history.Call{
				"the replay after the delete turned into a create": recreated,
				"the owner's delete left out":                      withoutDelete,
			} {
				bad, err := linearize.Check(calls, linearize.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: with %s: %s", k, name, bad)
				if bad.OK || len(bad.Violations) != 1 || !slices.Equal(bad.Violations[0].Intents, []string{"intent-0001"}) {
					t.Errorf("the records with %s: %s; want one violation naming intent-0001", name, bad)
				}
			}
		})
	}
}

// checkLinearizable merges the call records of every executor process and
// checks them against the task service's model; a violation fails the test
// and leaves porcupine's visualisation as a test artifact named after the
// first intent it names.
func checkLinearizable(t *testing.T, callsDir string) {
	t.Helper()
	v, err := checkCallRecords(callsDir, t.ArtifactDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("call records: %d files from %d executor processes, %d lines cut short by a kill", v.files, v.sessions, v.torn)
	t.Log(v.res)
	if v.res.OK {
		return
	}
	if v.html == "" {
		t.Errorf("the calls made under faults: %s", v.res)
		return
	}
	t.Errorf("the calls made under faults: %s; visualisation: %s", v.res, v.html)
}

// callsVerdict is the linearizability check of a directory of call records.
type callsVerdict struct {
	res                   linearize.Result
	files, sessions, torn int
	html                  string // the visualisation written, if any
}

// checkCallRecords checks the call records (*.jsonl) in callsDir; on a
// violation it writes the visualisation into artifactDir, named after the
// first intent the violations name.
func checkCallRecords(callsDir, artifactDir string) (callsVerdict, error) {
	files, err := filepath.Glob(filepath.Join(callsDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		return callsVerdict{}, fmt.Errorf("no call records in %s (%v)", callsDir, err)
	}
	h, err := history.Read(files...)
	if err != nil {
		return callsVerdict{}, fmt.Errorf("reading the call records: %w", err)
	}
	v := callsVerdict{files: len(files), sessions: h.Sessions, torn: h.Torn}
	html := filepath.Join(artifactDir, "linearizability.html")
	v.res, err = linearize.Check(h.Calls, linearize.Options{Visualization: html, Timeout: 5 * time.Minute})
	if err != nil {
		return v, fmt.Errorf("checking linearizability: %w", err)
	}
	if v.res.Visualization == "" {
		return v, nil
	}
	v.html = html
	if vs := v.res.Violations; len(vs) > 0 && len(vs[0].Intents) > 0 {
		named := filepath.Join(artifactDir, "linearizability-"+fileSafe(vs[0].Intents[0])+".html")
		if err := os.Rename(html, named); err == nil {
			v.html = named
		}
	}
	return v, nil
}

// fileSafe keeps letters, digits, dot, dash and underscore of s.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
}

// readCallRecords reads every executor's call record in callsDir.
func readCallRecords(t *testing.T, callsDir string) history.History {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(callsDir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(files...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// answeredOutcomes counts the answered calls of h by outcome.
func answeredOutcomes(h history.History) map[string]int {
	answered := map[string]int{}
	for _, c := range h.Calls {
		if c.Answered {
			answered[c.Outcome]++
		}
	}
	return answered
}
