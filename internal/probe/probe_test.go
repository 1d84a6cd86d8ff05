package probe

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// memService is a task service in memory. keep says whether it keeps its
// keys; forgetOnDelete whether a key goes with its task.
type memService struct {
	keep bool

	mu       sync.Mutex
	n        int
	keys     map[string]memEntry // intent id → first digest and task
	tasks    map[string][]string // intent id → task ids that exist
	dropNext bool
	seen     []string // every intent id called or deleted
	scopes   []string // the scope of every call and deletion
	titles   []string // the title of every call
}

type memEntry struct{ digest, task string }

func newMem(keep bool) *memService {
	return &memService{keep: keep, keys: map[string]memEntry{}, tasks: map[string][]string{}}
}

func (m *memService) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	m.mu.Lock()
	m.seen = append(m.seen, req.IntentID)
	m.scopes = append(m.scopes, req.Scope)
	m.titles = append(m.titles, req.Task.Title)
	res := taskservice.Result{StoreID: "mem-1"}
	e, ok := m.keys[req.IntentID]
	switch {
	case ok && m.keep && e.digest == req.RequestDigest:
		res.Outcome, res.TaskID = taskservice.Replayed, e.task
	case ok && m.keep:
		res.Outcome, res.TaskID = taskservice.Conflict, e.task
	default:
		m.n++
		id := fmt.Sprintf("mem-%d", m.n)
		m.keys[req.IntentID] = memEntry{req.RequestDigest, id}
		m.tasks[req.IntentID] = append(m.tasks[req.IntentID], id)
		res.Outcome, res.TaskID = taskservice.Created, id
	}
	drop := m.dropNext
	m.dropNext = false
	m.mu.Unlock()
	if drop {
		<-ctx.Done()
		return taskservice.Result{}, taskservice.Transient(ctx.Err())
	}
	return res, nil
}

func (m *memService) target(hooks bool) Target {
	t := Target{Target: servicetest.Target{Name: "memory service", Service: m, Scope: "the memory"}}
	if !hooks {
		return t
	}
	t.Delete = func(_ context.Context, scope, id string) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.seen = append(m.seen, id)
		m.scopes = append(m.scopes, scope)
		delete(m.tasks, id)
		delete(m.keys, id) // the key goes with its task
		return nil
	}
	t.LoseReply = func(context.Context) (func(context.Context) error, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.dropNext = true
		return func(context.Context) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.dropNext = false
			return nil
		}, nil
	}
	t.Count = func(_ context.Context, id string) (int, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.tasks[id]), nil
	}
	return t
}

// noKeyTarget presents m as the adapter of a service with no key would: m
// itself is the adapter's protocol (lookup, then create), Naive creates on
// every call beside it, and Find looks a key up; with lagging, the lookup
// does not see a create yet.
func (m *memService) noKeyTarget(lagging bool) Target {
	t := m.target(true)
	t.Class = "no key: the adapter looks up and locks"
	t.Naive = taskservice.Func(func(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.seen = append(m.seen, req.IntentID)
		m.n++
		id := fmt.Sprintf("mem-%d", m.n)
		m.tasks[req.IntentID] = append(m.tasks[req.IntentID], id)
		return taskservice.Result{Outcome: taskservice.Created, TaskID: id, StoreID: "mem-1"}, nil
	})
	t.Find = func(_ context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		e, ok := m.keys[req.IntentID]
		if !ok || lagging {
			return taskservice.Result{StoreID: "mem-1"}, false, nil
		}
		return taskservice.Result{Outcome: taskservice.Replayed, TaskID: e.task, StoreID: "mem-1"}, true, nil
	}
	return t
}

// fast are options that keep the tests short and their output fixed.
var fast = Options{Options: servicetest.Options{RunID: "test1", LostReplyWait: 100 * time.Millisecond, RetryDelay: time.Millisecond}}

func statuses(rep *Report) map[string]Status {
	m := map[string]Status{}
	for _, r := range rep.Rows {
		m[r.ID] = r.Status
	}
	return m
}

func run(t *testing.T, target Target, o Options) *Report {
	t.Helper()
	p, err := NewPlan(target, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, target, p)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestTheProbeJudgesEachKindOfService(t *testing.T) {
	forgetful := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "t-new"}, nil
	})
	for _, tc := range []struct {
		name        string
		target      Target
		want        map[string]Status
		safe        bool
		summaryHas  []string
		verdictLead string
	}{
		{
			name:   "a service that keeps its keys and forgets them with a deleted task is safe, with the deletion as a caveat",
			target: newMem(true).target(true),
			want: map[string]Status{RowRetry: Safe, RowConflict: Safe, RowConcurrent: Safe, RowLostReply: Safe,
				RowAfterDelete: Caveat, RowScope: Safe, RowReadAfterWrite: NotApplicable, RowNaive: NotApplicable},
			safe:        true,
			verdictLead: "safe for at-least-once delivery, with a caveat",
			summaryHas:  []string{"a deleted task is created again by a late resend within the approval's lifetime"},
		},
		{
			name:   "a service that creates on every call is unsafe, and the verdict names the rows",
			target: newMem(false).target(true),
			want: map[string]Status{RowRetry: Unsafe, RowConflict: Unsafe, RowConcurrent: Unsafe, RowLostReply: Unsafe,
				RowAfterDelete: Caveat, RowScope: Safe, RowReadAfterWrite: NotApplicable, RowNaive: NotApplicable},
			verdictLead: "unsafe for at-least-once delivery",
			summaryHas: []string{"a resend of the same approval creates a second task (second call, same key and body)",
				"concurrent deliveries of one approval create more than one task (N concurrent calls, one key)"},
		},
		{
			name:   "a function that forgets its keys is unsafe even though it cannot count, lose a reply or delete",
			target: Target{Target: servicetest.Target{Name: "forgetful function", Service: forgetful}},
			want: map[string]Status{RowRetry: Unsafe, RowConflict: Unsafe, RowConcurrent: Unsafe, RowLostReply: Unknown,
				RowAfterDelete: Unknown, RowScope: Unknown, RowReadAfterWrite: NotApplicable, RowNaive: NotApplicable},
			verdictLead: "unsafe for at-least-once delivery",
			summaryHas:  []string{"second call, same key and body"},
		},
		{
			name:   "a correct service without hooks is not proven safe: the rows it cannot measure are unknown",
			target: newMem(true).target(false),
			want: map[string]Status{RowRetry: Safe, RowConflict: Safe, RowConcurrent: Safe, RowLostReply: Unknown,
				RowAfterDelete: Unknown, RowScope: Safe, RowReadAfterWrite: NotApplicable, RowNaive: NotApplicable},
			verdictLead: "not proven safe for at-least-once delivery: not measured: a lost reply, then a retry; key remembered after the task is deleted",
		},
		{
			name: "a service that states it never deletes answers the deletion row by that statement",
			target: func() Target {
				tg := newMem(true).target(true)
				tg.Delete, tg.NeverDeletes = nil, true
				return tg
			}(),
			want: map[string]Status{RowRetry: Safe, RowConflict: Safe, RowConcurrent: Safe, RowLostReply: Safe,
				RowAfterDelete: Safe, RowScope: Safe, RowReadAfterWrite: NotApplicable, RowNaive: NotApplicable},
			safe:        true,
			verdictLead: "safe for at-least-once delivery",
		},
		{
			name:   "a service with no key whose adapter looks up at once is safe, and its naive row counts two tasks without being judged",
			target: newMem(true).noKeyTarget(false),
			want: map[string]Status{RowRetry: Safe, RowConflict: Safe, RowConcurrent: Safe, RowLostReply: Safe,
				RowAfterDelete: Caveat, RowScope: Safe, RowReadAfterWrite: Safe, RowNaive: Info},
			safe:        true,
			verdictLead: "safe for at-least-once delivery, with a caveat",
		},
		{
			name:   "a service with no key whose lookup does not see a create at once is unsafe: retries are unsafe",
			target: newMem(true).noKeyTarget(true),
			want: map[string]Status{RowRetry: Safe, RowConflict: Safe, RowConcurrent: Safe, RowLostReply: Safe,
				RowAfterDelete: Caveat, RowScope: Safe, RowReadAfterWrite: Unsafe, RowNaive: Info},
			verdictLead: "unsafe for at-least-once delivery",
			summaryHas:  []string{"retries are unsafe", "(a create seen by the next lookup)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.target, fast)
			if got := statuses(rep); !maps.Equal(got, tc.want) {
				var text bytes.Buffer
				_ = WriteText(&text, rep)
				t.Errorf("statuses %v, want %v\n%s", got, tc.want, text.String())
			}
			if rep.Verdict.Safe != tc.safe {
				t.Errorf("verdict safe = %v, want %v: %s", rep.Verdict.Safe, tc.safe, rep.Verdict.Summary)
			}
			if !strings.HasPrefix(rep.Verdict.Summary, tc.verdictLead) {
				t.Errorf("verdict %q, want it to start %q", rep.Verdict.Summary, tc.verdictLead)
			}
			for _, s := range tc.summaryHas {
				if !strings.Contains(rep.Verdict.Summary, s) {
					t.Errorf("verdict %q lacks %q", rep.Verdict.Summary, s)
				}
			}
		})
	}
}

func TestTheProbeTouchesOnlyIntentIdsWithItsOwnPrefix(t *testing.T) {
	m := newMem(true)
	rep := run(t, m.target(true), Options{Options: servicetest.Options{RunID: "", LostReplyWait: 100 * time.Millisecond, RetryDelay: time.Millisecond}})
	if len(rep.RunID) != 16 {
		t.Errorf("run id %q, want 16 random hex digits", rep.RunID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) == 0 {
		t.Fatal("the service saw no call")
	}
	for _, id := range m.seen {
		if !strings.HasPrefix(id, Prefix+rep.RunID+"-") {
			t.Errorf("the probe touched intent id %q, outside %s%s-", id, Prefix, rep.RunID)
		}
	}
}

func TestThePlanCountsWhatTheRunSends(t *testing.T) {
	m := newMem(true)
	target := m.target(true)
	p, err := NewPlan(target, fast)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), target, p)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != int64(p.Calls) {
		t.Errorf("the run sent %d calls, the plan said %d", rep.Calls, p.Calls)
	}
	if p.Tasks != 5 || len(p.Intents) != 5 || p.Deletes != 1 {
		t.Errorf("plan: %d tasks, %d intents, %d deletes; want 5, 5, 1", p.Tasks, len(p.Intents), p.Deletes)
	}
	for _, want := range []string{"25 create calls", `"probe-test1-"`, "creates 5 tasks", "It deletes 1 task of its own again.", "never touches any other intent id"} {
		if !strings.Contains(p.String(), want) {
			t.Errorf("plan %q lacks %q", p.String(), want)
		}
	}
}

func TestThePlanRefusesBadOptions(t *testing.T) {
	target := newMem(true).target(false)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"one call is not concurrency", Options{Options: servicetest.Options{Concurrency: 1}}},
		{"more than the bound is a load test", Options{Options: servicetest.Options{Concurrency: MaxConcurrency + 1}}},
		{"a run id must be safe in any intent id", Options{Options: servicetest.Options{RunID: "../x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPlan(target, tc.o); err == nil || !strings.HasPrefix(err.Error(), "probe: ") {
				t.Errorf("NewPlan(%+v) = %v, want a probe: error", tc.o, err)
			}
		})
	}
	if _, err := NewPlan(Target{}, Options{}); err == nil {
		t.Error("NewPlan accepted a target without a service")
	}
}

func TestAServiceThatAnswersTransientlyWhileTheFirstCallRunsIsSafe(t *testing.T) {
	// Like some real services: a call with a key whose first call is still
	// running gets a transient error; the retry gets the first result.
	m := newMem(true)
	var mu sync.Mutex
	running := map[string]bool{}
	svc := taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		mu.Lock()
		if running[req.IntentID] {
			mu.Unlock()
			return taskservice.Result{}, taskservice.Transient(errors.New("409 in progress"))
		}
		running[req.IntentID] = true
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		defer func() { mu.Lock(); delete(running, req.IntentID); mu.Unlock() }()
		return m.Create(ctx, req)
	})
	target := m.target(true)
	target.Service = svc
	rep := run(t, target, fast)
	if s := statuses(rep)[RowConcurrent]; s != Safe {
		t.Errorf("concurrent row %s, want safe: %+v", s, rep.Rows[2])
	}
	if !strings.Contains(rep.Rows[2].Seen, "retried after a transient error") {
		t.Errorf("the concurrent row does not say that calls were retried: %s", rep.Rows[2].Seen)
	}
}

func TestAStoppedRunReportsTheRestAsNotRun(t *testing.T) {
	target := newMem(true).target(false)
	p, err := NewPlan(target, fast)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, target, p)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run on a stopped context: %v, want context.Canceled", err)
	}
	for _, r := range rep.Rows {
		if r.Status != Unknown {
			t.Errorf("row %s is %s after the stop, want unknown", r.ID, r.Status)
		}
	}
	if rep.Verdict.Safe {
		t.Error("a stopped run was judged safe")
	}
}

func TestTheTableMatchesTheGoldenFiles(t *testing.T) {
	for _, tc := range []struct {
		file   string
		target Target
	}{
		{"table-safe-with-caveat.golden", newMem(true).target(true)},
		{"table-unsafe.golden", newMem(false).target(true)},
		{"table-unproven.golden", newMem(true).target(false)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep := run(t, tc.target, fast)
			var got bytes.Buffer
			if err := WriteText(&got, rep); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.file), got.Bytes())
		})
	}
}

func TestTheJSONReportHasEveryRowAndTheVerdict(t *testing.T) {
	rep := run(t, newMem(false).target(true), fast)
	var out bytes.Buffer
	if err := WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "report-unsafe.json.golden"), out.Bytes())
	ids := make([]string, 0, len(rep.Rows))
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{RowRetry, RowConflict, RowConcurrent, RowLostReply, RowAfterDelete, RowScope, RowReadAfterWrite, RowNaive}) {
		t.Errorf("rows %v", ids)
	}
}

func TestTheNaiveRowCountsTheTasksOfTwoPlainCreatesAndDeletesThem(t *testing.T) {
	m := newMem(true)
	tg := m.noKeyTarget(false)
	tg.Class = "no key: the adapter looks up and locks"
	rep := run(t, tg, fast)
	var naive Row
	for _, r := range rep.Rows {
		if r.ID == RowNaive {
			naive = r
		}
	}
	if naive.Answer != "2 tasks" || naive.Status != Info {
		t.Errorf("naive row answered %q (%s), want 2 tasks (info)", naive.Answer, naive.Status)
	}
	for _, want := range []string{"created mem-", "2 tasks for the intent", "deleted again, 0 tasks left"} {
		if !strings.Contains(naive.Seen, want) {
			t.Errorf("naive row saw %q, want it to hold %q", naive.Seen, want)
		}
	}
	if rep.Class != tg.Class {
		t.Errorf("report class %q, want %q", rep.Class, tg.Class)
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "class: no key: the adapter looks up and locks\n") {
		t.Errorf("the table does not state the class:\n%s", text.String())
	}
	if slices.Contains(rep.Verdict.Unsafe, RowNaive) || slices.Contains(rep.Verdict.Unknown, RowNaive) {
		t.Errorf("the naive row was judged: %+v", rep.Verdict)
	}
}

func TestARowThatDoesNotApplySaysWhy(t *testing.T) {
	tg := newMem(true).target(true)
	tg.NaiveWhyNot, tg.FindWhyNot = "every create is keyed", "no lookup decides a create"
	rep := run(t, tg, fast)
	for _, r := range rep.Rows {
		switch r.ID {
		case RowNaive, RowReadAfterWrite:
			if r.Status != NotApplicable || r.Answer != "not applicable" || (r.Seen != tg.NaiveWhyNot && r.Seen != tg.FindWhyNot) {
				t.Errorf("row %s: %s %q, saw %q; want not applicable with the target's reason", r.ID, r.Status, r.Answer, r.Seen)
			}
		}
	}
	if !rep.Verdict.Safe && len(rep.Verdict.Unknown) > 0 {
		t.Errorf("a row that does not apply made the verdict unproven: %+v", rep.Verdict)
	}
}

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/probe -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./internal/probe -update rewrites it); got:\n%s", path, got)
	}
}

func TestTheProbesTasksAreInItsScopeWithItsTitleAndDeletedAtTheEnd(t *testing.T) {
	left := func(m *memService) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, ts := range m.tasks {
			n += len(ts)
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		keep    bool
		target  func(m *memService) Target
		left    int
		says    string
		deleted int
	}{
		{name: "by default every task of the run is deleted at its end and none is left", target: func(m *memService) Target { return m.target(true) },
			left: 0, deleted: 5, says: "deleted 5 tasks of this run; 0 tasks left"},
		{name: "with KeepTasks the run's tasks are left and counted", keep: true, target: func(m *memService) Target { return m.target(true) },
			left: 5, says: "kept 5 tasks of this run (--keep-tasks)"},
		{name: "for a service with no key, the naive row's doubled tasks go too", target: func(m *memService) Target { return m.noKeyTarget(false) },
			left: 0, deleted: 6, says: "deleted 6 tasks of this run; 0 tasks left"},
		{name: "a target that cannot delete says that the tasks are left", target: func(m *memService) Target {
			t := m.target(true)
			t.Delete = nil
			return t
		}, left: 4, says: "4 tasks of this run left in place: the target cannot delete a task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(true)
			o := fast
			o.KeepTasks = tc.keep
			rep := run(t, tc.target(m), o)
			if n := left(m); n != tc.left {
				t.Errorf("%d tasks left in the service, want %d", n, tc.left)
			}
			if rep.Cleanup.Deleted != tc.deleted || rep.Cleanup.Left != tc.left || rep.Cleanup.Kept != tc.keep {
				t.Errorf("cleanup %+v, want %d deleted, %d left, kept %v", rep.Cleanup, tc.deleted, tc.left, tc.keep)
			}
			if !strings.Contains(rep.Cleanup.String(), tc.says) {
				t.Errorf("cleanup says %q, want %q", rep.Cleanup.String(), tc.says)
			}
			var text bytes.Buffer
			if err := WriteText(&text, rep); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "cleanup: "+tc.says) {
				t.Errorf("the table does not say the cleanup:\n%s", text.String())
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, sc := range m.scopes {
				if sc != Scope {
					t.Fatalf("a call or deletion in scope %q, want %q", sc, Scope)
				}
			}
			for _, title := range m.titles {
				if !strings.HasPrefix(title, TitlePrefix) {
					t.Fatalf("title %q does not start %q", title, TitlePrefix)
				}
			}
		})
	}
}
