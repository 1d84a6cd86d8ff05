package taskservice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// forgetful is a service whose key is its task, as a CalDAV resource is: a
// deleted task frees its key, and a create succeeds again.
type forgetful struct {
	mu      sync.Mutex
	tasks   map[string]binding // by scope + "/" + intent id
	creates int
	calls   int
}

func newForgetful() *forgetful { return &forgetful{tasks: map[string]binding{}} }

func (s *forgetful) key(req taskservice.Request) string { return req.KeyScope() + "/" + req.IntentID }

func (s *forgetful) Create(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if b, ok := s.tasks[s.key(req)]; ok {
		return answer(b, req), nil
	}
	s.creates++
	b := binding{digest: req.RequestDigest, taskID: fmt.Sprintf("task-%d", s.creates)}
	s.tasks[s.key(req)] = b
	return taskservice.Result{Outcome: taskservice.Created, TaskID: b.taskID, StoreID: "forgetful"}, nil
}

func answer(b binding, req taskservice.Request) taskservice.Result {
	res := taskservice.Result{Outcome: taskservice.Replayed, TaskID: b.taskID, StoreID: "forgetful"}
	if b.digest != req.RequestDigest {
		res.Outcome = taskservice.Conflict
	}
	return res
}

func (s *forgetful) Find(_ context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.tasks[s.key(req)]
	if !ok {
		return taskservice.Result{StoreID: "forgetful"}, false, nil
	}
	return answer(b, req), true, nil
}

func (s *forgetful) RemembersDeletedKeys() bool { return false }

func (s *forgetful) delete(scope, intent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, scope+"/"+intent)
}

func (s *forgetful) counts() (calls, creates, existing int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.creates, len(s.tasks)
}

// memoryLedger keeps entries in a map, merging as Ledger.Put says.
type memoryLedger struct {
	mu      sync.Mutex
	entries map[string]taskservice.LedgerEntry
	failPut bool
}

func newMemoryLedger() *memoryLedger {
	return &memoryLedger{entries: map[string]taskservice.LedgerEntry{}}
}

func (l *memoryLedger) Get(_ context.Context, scope, intent string) (taskservice.LedgerEntry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[scope+"/"+intent]
	return e, ok, nil
}

func (l *memoryLedger) Put(_ context.Context, e taskservice.LedgerEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failPut {
		return errors.New("memory ledger: refusing writes")
	}
	k := e.Scope + "/" + e.IntentID
	if old, ok := l.entries[k]; ok {
		if old.NotAfter.IsZero() || (!e.NotAfter.IsZero() && old.NotAfter.After(e.NotAfter)) {
			e.NotAfter = old.NotAfter
		}
		e.RequestDigest, e.TaskID = old.RequestDigest, old.TaskID
	}
	l.entries[k] = e
	return nil
}

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestKeepDeletedKeys(t *testing.T) {
	ctx := context.Background()
	first := taskservice.Request{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA}
	changed := first
	changed.RequestDigest = digestB

	tests := []struct {
		name        string
		deleteFirst bool
		resend      taskservice.Request
		want        taskservice.Result
		wantCreates int
		wantTasks   int
	}{
		{"a resend while the task exists is replayed by the service", false, first,
			taskservice.Result{Outcome: taskservice.Replayed, TaskID: "task-1", StoreID: "forgetful"}, 1, 1},
		{"a resend after the task was deleted is replayed, marked deleted, and nothing is created again", true, first,
			taskservice.Result{Outcome: taskservice.Replayed, TaskID: "task-1", StoreID: "forgetful", TaskDeleted: true}, 1, 0},
		{"another digest after the task was deleted is a conflict and creates nothing", true, changed,
			taskservice.Result{Outcome: taskservice.Conflict, TaskID: "task-1", StoreID: "forgetful", Reason: "the intent ledger holds this key for another request digest"}, 1, 0},
		{"another digest while the task exists is a conflict", false, changed,
			taskservice.Result{Outcome: taskservice.Conflict, TaskID: "task-1", StoreID: "forgetful", Reason: "the intent ledger holds this key for another request digest"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, ledger := newForgetful(), newMemoryLedger()
			kept, err := taskservice.KeepDeletedKeys(svc, ledger)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kept.Create(ctx, first)
			if err != nil || res.Outcome != taskservice.Created {
				t.Fatalf("first call: %+v, %v; want created", res, err)
			}
			if e, ok, _ := ledger.Get(ctx, "team-a", "intent-1"); !ok || e.TaskID != "task-1" || e.RequestDigest != digestA {
				t.Fatalf("ledger after the create: %+v, %v; want task-1 with the first digest", e, ok)
			}
			if tt.deleteFirst {
				svc.delete("team-a", "intent-1")
			}
			got, err := kept.Create(ctx, tt.resend)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("resend: %+v, want %+v", got, tt.want)
			}
			if _, creates, tasks := svc.counts(); creates != tt.wantCreates || tasks != tt.wantTasks {
				t.Errorf("creates %d, tasks %d; want %d, %d", creates, tasks, tt.wantCreates, tt.wantTasks)
			}
		})
	}
}

func TestKeepDeletedKeysScopesAreApart(t *testing.T) {
	ctx := context.Background()
	svc, ledger := newForgetful(), newMemoryLedger()
	kept, _ := taskservice.KeepDeletedKeys(svc, ledger)
	a := taskservice.Request{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA}
	b := taskservice.Request{Scope: "team-b", IntentID: "intent-1", RequestDigest: digestB}
	if _, err := kept.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	svc.delete("team-a", "intent-1")
	res, err := kept.Create(ctx, b)
	if err != nil || res.Outcome != taskservice.Created || res.TaskID != "task-2" {
		t.Errorf("the same intent id in another scope: %+v, %v; want created task-2", res, err)
	}
}

func TestKeepDeletedKeysExtendsTheEntryToTheLatestApproval(t *testing.T) {
	ctx := context.Background()
	svc, ledger := newForgetful(), newMemoryLedger()
	kept, _ := taskservice.KeepDeletedKeys(svc, ledger)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req := taskservice.Request{IntentID: "intent-1", RequestDigest: digestA, NotAfter: t0}
	if _, err := kept.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	svc.delete(taskservice.DefaultScope, "intent-1")
	later := req
	later.NotAfter = t0.Add(time.Hour)
	if _, err := kept.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	e, _, _ := ledger.Get(ctx, taskservice.DefaultScope, "intent-1")
	if !e.NotAfter.Equal(later.NotAfter) {
		t.Errorf("the entry's not_after is %v after a replay by a later approval; want %v", e.NotAfter, later.NotAfter)
	}
}

func TestKeepDeletedKeysReportsAFailedLedgerWriteAsTransient(t *testing.T) {
	ctx := context.Background()
	svc, ledger := newForgetful(), newMemoryLedger()
	ledger.failPut = true
	kept, _ := taskservice.KeepDeletedKeys(svc, ledger)
	_, err := kept.Create(ctx, taskservice.Request{IntentID: "intent-1", RequestDigest: digestA})
	if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) {
		t.Errorf("a create whose ledger write failed answered %v; want a transient error", err)
	}
}

func TestKeepDeletedKeysChoosesByWhatTheServiceSays(t *testing.T) {
	remembering := &memoryService{tasks: map[string]binding{}}
	tests := []struct {
		name      string
		svc       taskservice.Service
		wantSame  bool
		wantError error
	}{
		{"a service that says nothing is taken to remember its keys and is used as it is", remembering, true, nil},
		{"a service that forgets and can look a key up is wrapped", newForgetful(), false, nil},
		{"a service that forgets and cannot look a key up is refused", forgetsNoFinder{}, false, taskservice.ErrForgetsKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := taskservice.KeepDeletedKeys(tt.svc, newMemoryLedger())
			if !errors.Is(err, tt.wantError) {
				t.Fatalf("error %v, want %v", err, tt.wantError)
			}
			if err != nil {
				return
			}
			if same := got == tt.svc; same != tt.wantSame {
				t.Errorf("returned the service as it is: %v, want %v", same, tt.wantSame)
			}
			if !taskservice.RemembersDeletedKeys(got) {
				t.Error("the result does not remember deleted keys")
			}
		})
	}
}

type forgetsNoFinder struct{}

func (forgetsNoFinder) Create(context.Context, taskservice.Request) (taskservice.Result, error) {
	return taskservice.Result{}, nil
}
func (forgetsNoFinder) RemembersDeletedKeys() bool { return false }

// A service whose key is its task forgets the key when the task is deleted;
// with an intent ledger, a resend after the deletion is replayed and marked
// deleted instead of creating the task again.
func ExampleKeepDeletedKeys() {
	ctx := context.Background()
	svc := newForgetful()
	kept, err := taskservice.KeepDeletedKeys(svc, newMemoryLedger())
	if err != nil {
		fmt.Println(err)
		return
	}
	req := taskservice.Request{Scope: "team-a", IntentID: "intent-0001", RequestDigest: digestA}
	res, _ := kept.Create(ctx, req)
	fmt.Println(res.Outcome, res.TaskID)
	svc.delete("team-a", "intent-0001") // the owner deletes the task
	res, _ = kept.Create(ctx, req)      // the approval is delivered again
	fmt.Println(res.Outcome, res.TaskID, "deleted:", res.TaskDeleted)
	_, creates, tasks := svc.counts()
	fmt.Println("creates", creates, "tasks", tasks)
	// Output:
	// created task-1
	// replayed task-1 deleted: true
	// creates 1 tasks 0
}

// legacyTasks is a forgetful service whose tasks were made before it
// proved them: Find refuses each with ErrUnprovenLegacy until ProveLegacy
// proves it from a ledger entry that binds its task id and digest.
type legacyTasks struct {
	*forgetful
	proven map[string]bool
}

func (s *legacyTasks) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	res, found, err := s.forgetful.Find(ctx, req)
	if found && !s.proven[s.key(req)] {
		return taskservice.Result{}, false, taskservice.Permanent(fmt.Errorf("task %s: %w", res.TaskID, taskservice.ErrUnprovenLegacy))
	}
	return res, found, err
}

func (s *legacyTasks) ProveLegacy(_ context.Context, e taskservice.LedgerEntry) (bool, error) {
	k := e.Scope + "/" + e.IntentID
	b, ok := s.tasks[k]
	if !ok || b.taskID != e.TaskID || b.digest != e.RequestDigest {
		return false, errors.New("the task at the key is not the one the entry binds")
	}
	s.proven[k] = true
	return true, nil
}

func TestATaskMadeBeforeProofsIsProvenFromItsLedgerEntryOnly(t *testing.T) {
	ctx := context.Background()
	req := taskservice.Request{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA}
	cases := []struct {
		name    string
		entry   taskservice.LedgerEntry
		replays bool
	}{
		{"the entry binds the task: answered replayed", taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "task-1"}, true},
		{"the entry binds another task id: refused, nothing proven", taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "task-9"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &legacyTasks{forgetful: newForgetful(), proven: map[string]bool{}}
			if _, err := svc.forgetful.Create(ctx, req); err != nil {
				t.Fatal(err)
			}
			ledger := newMemoryLedger()
			if err := ledger.Put(ctx, tc.entry); err != nil {
				t.Fatal(err)
			}
			kept, err := taskservice.KeepDeletedKeys(svc, ledger)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kept.Create(ctx, req)
			if tc.replays {
				if err != nil || res.Outcome != taskservice.Replayed || res.TaskID != "task-1" {
					t.Fatalf("Create = %+v, %v; want replayed task-1", res, err)
				}
				return
			}
			if !errors.Is(err, taskservice.ErrUnprovenLegacy) || !taskservice.IsPermanent(err) {
				t.Fatalf("Create = %+v, %v; want the permanent ErrUnprovenLegacy", res, err)
			}
			if svc.proven["team-a/intent-1"] {
				t.Error("the task was proven from an entry that binds another task")
			}
		})
	}
}
