package provider

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const crashDir = "provider-db"

// openClone opens a store on a crash clone of fs, as a restarted process
// would find the disk after a crash at that moment.
func openClone(t *testing.T, fs *vfs.MemFS, cfg vfs.CrashCloneCfg) *Store {
	t.Helper()
	clone := fs.CrashClone(cfg)
	st, err := Open(crashDir, Options{FS: clone, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open crash clone: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// retryExactlyOnce retries req on st and checks that its intent id then has
// exactly one task.
func retryExactlyOnce(t *testing.T, st *Store, req CreateRequest) CreateResponse {
	t.Helper()
	resp, err := st.Create(ctxT(t), req)
	if err != nil {
		t.Fatalf("retry %s: %v", req.IntentID, err)
	}
	if n := len(allRecords(t, st, RecordTasks, req.IntentID).Tasks); n != 1 {
		t.Errorf("after the retry, intent %q has %d tasks, want 1", req.IntentID, n)
	}
	return resp
}

func TestCrashSafetyOfAScriptedSequence(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st := openStore(t, crashDir, Options{FS: fs})
	a, a2 := newRequest("intent-A", "A"), newRequest("intent-A", "A changed")
	b, c := newRequest("intent-B", "B"), newRequest("intent-C", "A") // C: A's content, another intent
	steps := []struct {
		name    string
		req     CreateRequest
		outcome string
		retry   string // outcome of a retry after the crash
	}{
		{"create A", a, OutcomeCreated, OutcomeReplayed},
		{"replay A", a, OutcomeReplayed, OutcomeReplayed},
		{"conflict on A", a2, OutcomeConflict, OutcomeConflict},
		{"create B", b, OutcomeCreated, OutcomeReplayed},
		{"create C with A's content", c, OutcomeCreated, OutcomeReplayed},
		{"replay B", b, OutcomeReplayed, OutcomeReplayed},
		{"replay A after the others", a, OutcomeReplayed, OutcomeReplayed},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want Counts
	for i, step := range steps {
		resp, err := st.Create(ctxT(t), step.req)
		if err != nil {
			t.Fatalf("step %d %s: %v", i+1, step.name, err)
		}
		if resp.Outcome != step.outcome {
			t.Fatalf("step %d %s: outcome %s, want %s", i+1, step.name, resp.Outcome, step.outcome)
		}
		want = resp.Counts
		for _, cfg := range []struct {
			label string
			cfg   vfs.CrashCloneCfg
		}{
			{"only synced data survives", vfs.CrashCloneCfg{UnsyncedDataPercent: 0}},
			{"half the unsynced data survives", vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}},
			{"all unsynced data survives", vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng}},
		} {
			t.Run(fmt.Sprintf("a crash after step %d (%s) when %s", i+1, step.name, cfg.label), func(t *testing.T) {
				cst := openClone(t, fs, cfg.cfg)
				// The step was answered, so it was synced: all of it survives.
				rep := audit(t, cst, true)
				if rep.counts != want {
					t.Errorf("counters after the crash %+v, want %+v", rep.counts, want)
				}
				resp := retryExactlyOnce(t, cst, step.req)
				if resp.Outcome != step.retry {
					t.Errorf("retry outcome %s, want %s", resp.Outcome, step.retry)
				}
				audit(t, cst, true)
			})
		}
	}
}

// TestCrashSafetyWhileCallsAreInFlight takes crash clones while callers keep
// committing groups, so some clones catch a commit half way. Every clone
// must hold each request whole or not at all, and a retry of every intent
// must leave exactly one task for it.
func TestCrashSafetyWhileCallsAreInFlight(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st := openStore(t, crashDir, Options{FS: fs})
	const callers, calls, intents = 4, 30, 12
	reqFor := func(g, k int) CreateRequest {
		id := fmt.Sprintf("intent-%d", (g*7+k)%intents)
		if (g+k)%9 == 0 {
			return newRequest(id, "changed "+id) // a conflicting resend
		}
		return newRequest(id, id)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for k := range calls {
				if _, err := st.Create(ctxT(t), reqFor(g, k)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); done.Store(true) }()

	rng := rand.New(rand.NewPCG(3, 4))
	var clones []*vfs.MemFS
	for !done.Load() && len(clones) < 12 {
		clones = append(clones, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}))
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	clones = append(clones, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	for i, clone := range clones {
		t.Run(fmt.Sprintf("crash clone %d holds whole requests only and a retry creates at most once", i+1), func(t *testing.T) {
			cst, err := Open(crashDir, Options{FS: clone, Logger: quietLogger()})
			if err != nil {
				t.Fatalf("open clone: %v", err)
			}
			defer cst.Close()
			audit(t, cst, true)
			for n := range intents {
				id := fmt.Sprintf("intent-%d", n)
				retryExactlyOnce(t, cst, newRequest(id, id))
			}
			rep := audit(t, cst, true)
			if rep.counts.TasksExisting != intents {
				t.Errorf("tasks %d after retrying every intent, want %d", rep.counts.TasksExisting, intents)
			}
		})
	}
	if got := st.Stats().RequestsReceived; got != callers*calls {
		t.Errorf("requests received %d, want %d", got, callers*calls)
	}
}
