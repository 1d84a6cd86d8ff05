package provider

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// approved is a create call for a key carried by an approval that expires
// at notAfter (zero: never).
func expiring(scope, intent string, notAfter time.Time) CreateRequest {
	req := scoped(scope, intent, "task of "+intent)
	if !notAfter.IsZero() {
		req.NotAfter = notAfter.UTC().Format(time.RFC3339)
	}
	return req
}

// keyOf returns the key's intent record, if the store keeps it.
func keyOf(t *testing.T, st *Store, scope, intent string) (FirstResult, bool) {
	t.Helper()
	page, err := st.Records(RecordsRequest{Kind: RecordIntents, Scope: scope, IntentID: intent})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Intents) == 0 {
		return FirstResult{}, false
	}
	return page.Intents[0], true
}

func compact(t *testing.T, st *Store) CompactResult {
	t.Helper()
	r, err := st.Compact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keyOnClock opens a store on a test clock that keeps a key allowance and
// margin past its not_after and compacts only when a test runs compact,
// and creates in scope team-a the key intent, whose approval expires ten
// minutes after the clock's start (notAfter).
func keyOnClock(t *testing.T, allowance, margin time.Duration, intent string) (clock *testClock, st *Store, first CreateResponse, notAfter time.Time) {
	t.Helper()
	clock = newTestClock()
	st = openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: allowance, KeyMargin: margin, CompactEvery: -1})
	notAfter = clock.Now().Add(10 * time.Minute)
	first, err := st.Create(ctxT(t), expiring("team-a", intent, notAfter))
	if err != nil {
		t.Fatal(err)
	}
	return clock, st, first, notAfter
}

// TestAKeyLivesWhileAnApprovalSeenForItCanPassTheGate is the proof of the
// key lifetime. The gate passes an approval while the executor's clock is
// at or before its not_after; an executor's clock runs behind the
// service's by a skew of at most the clock allowance. Over random approval
// lifetimes, skews and send times, with compaction run at every step, a
// key must be present at every moment at which some approval the service
// has seen for it could still pass the gate: service time - allowance <=
// the latest not_after seen. The margin is none here, so that the bound is
// tight.
func TestAKeyLivesWhileAnApprovalSeenForItCanPassTheGate(t *testing.T) {
	const allowance = 5 * time.Minute
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d: every key is present while an approval seen for it can pass, and compacted after", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			clock := newTestClock()
			st := openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: allowance, KeyMargin: -1, CompactEvery: -1, CompactChunk: 7})
			ctx := ctxT(t)
			type key struct {
				scope, intent string
				approvals     []time.Time // the not_after of every approval the service saw
				task          string
				compacted     bool
			}
			latest := func(k *key) time.Time {
				var m time.Time
				for _, a := range k.approvals {
					if a.After(m) {
						m = a
					}
				}
				return m
			}
			var keys []*key
			for step := range 120 {
				now := clock.Advance(time.Duration(rng.IntN(int(20*time.Minute/time.Second))) * time.Second)
				// New keys: an approval made now, for a lifetime of 1 s to 2 h.
				for range rng.IntN(3) {
					k := &key{scope: fmt.Sprintf("s%d", rng.IntN(3)), intent: fmt.Sprintf("intent-%d", len(keys))}
					na := now.Add(time.Duration(1+rng.IntN(7200)) * time.Second)
					resp, err := st.Create(ctx, expiring(k.scope, k.intent, na))
					if err != nil || resp.Outcome != OutcomeCreated {
						t.Fatalf("step %d: create %s: %+v, %v", step, k.intent, resp, err)
					}
					k.approvals, k.task = []time.Time{na}, resp.TaskID
					keys = append(keys, k)
				}
				// Resends that pass the gate: an executor with a random skew
				// sends one of the approvals seen, or a new approval for the
				// same request with another lifetime.
				for _, k := range keys {
					if k.compacted || rng.IntN(4) != 0 {
						continue
					}
					skew := time.Duration(rng.IntN(int(allowance/time.Second)+1)) * time.Second
					na := k.approvals[rng.IntN(len(k.approvals))]
					if rng.IntN(2) == 0 {
						na = now.Add(time.Duration(rng.IntN(7200)-1800) * time.Second)
					}
					if now.Add(-skew).After(na) {
						continue // the gate refuses it: it never reaches the service
					}
					resp, err := st.Create(ctx, expiring(k.scope, k.intent, na))
					if err != nil || resp.Outcome != OutcomeReplayed || resp.TaskID != k.task {
						t.Fatalf("step %d: resend of %s/%s passing the gate (not_after %s, skew %s) was answered %+v, %v; want replayed %s",
							step, k.scope, k.intent, na, skew, resp, err, k.task)
					}
					k.approvals = append(k.approvals, na)
				}
				compact(t, st)
				for _, k := range keys {
					canPass := !now.Add(-allowance).After(latest(k))
					_, present := keyOf(t, st, k.scope, k.intent)
					switch {
					case canPass && !present:
						t.Fatalf("step %d at %s: key %s/%s is gone, but an approval seen for it (not_after %s) can still pass the gate with a clock %s behind",
							step, now, k.scope, k.intent, latest(k), allowance)
					case !canPass && present:
						t.Fatalf("step %d at %s: key %s/%s is kept although every approval seen for it expired (latest %s) and compaction ran",
							step, now, k.scope, k.intent, latest(k))
					}
					k.compacted = !present
				}
			}
			keysSeen, _ := st.KeyStats()
			if c := st.Stats(); c.TasksExisting != int64(len(keys)) || keysSeen.Live+keysSeen.Compacted != int64(len(keys)) {
				t.Errorf("counts %+v, keys %+v for %d keys: compaction must never delete a task", c, keysSeen, len(keys))
			}
			if keysSeen.Compacted == 0 {
				t.Error("no key was compacted: the run proves nothing about compaction")
			}
		})
	}
}

func TestCompactionForgetsExpiredKeysAndKeepsTasks(t *testing.T) {
	allowance, margin := 5*time.Minute, time.Hour
	clock, st, first, notAfter := keyOnClock(t, allowance, margin, "intent-short")
	ctx := ctxT(t)
	if _, err := st.Create(ctx, expiring("team-a", "intent-forever", time.Time{})); err != nil {
		t.Fatal(err)
	}
	keep := notAfter.Add(allowance + margin)
	t.Run("the key records when it may be compacted: not_after plus allowance plus margin", func(t *testing.T) {
		fr, ok := keyOf(t, st, "team-a", "intent-short")
		if !ok || fr.KeepUntil != keep.Format(time.RFC3339Nano) {
			t.Fatalf("key %+v; want keep_until %s", fr, keep)
		}
		if fr, _ := keyOf(t, st, "team-a", "intent-forever"); fr.KeepUntil != "" {
			t.Errorf("a key whose approval never expires has keep_until %q; want none (forever)", fr.KeepUntil)
		}
	})
	t.Run("at keep_until the key is still there", func(t *testing.T) {
		clock.Advance(keep.Sub(clock.Now()))
		if r := compact(t, st); r.KeysCompacted != 0 {
			t.Fatalf("compacted %+v at keep_until", r)
		}
	})
	t.Run("after keep_until the key is compacted and its task stays", func(t *testing.T) {
		clock.Advance(time.Second)
		if r := compact(t, st); r.KeysCompacted != 1 {
			t.Fatalf("compaction %+v; want 1 key", r)
		}
		if _, ok := keyOf(t, st, "team-a", "intent-short"); ok {
			t.Error("the expired key is still there")
		}
		tasks := allRecords(t, st, RecordTasks, "")
		if len(tasks.Tasks) != 2 || tasks.Tasks[0].TaskID != first.TaskID || st.Stats() != counts(2, 2, 2) {
			t.Errorf("tasks %+v, counts %+v; want both tasks kept", tasks.Tasks, st.Stats())
		}
		keys, scopes := st.KeyStats()
		if keys.Live != 1 || keys.Compacted != 1 || scopes[0].KeysLive != 1 || scopes[0].KeysCompacted != 1 {
			t.Errorf("keys %+v, scopes %+v; want 1 live, 1 compacted", keys, scopes)
		}
	})
	t.Run("a key whose approval never expires is never compacted", func(t *testing.T) {
		clock.Advance(24 * 365 * time.Hour)
		compact(t, st)
		if _, ok := keyOf(t, st, "team-a", "intent-forever"); !ok {
			t.Error("the key kept forever was compacted")
		}
	})
}

func TestAReplayWithALaterNotAfterExtendsTheKey(t *testing.T) {
	clock := newTestClock()
	allowance := 5 * time.Minute
	st := openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: allowance, KeyMargin: -1, CompactEvery: -1})
	ctx := ctxT(t)
	n1 := clock.Now().Add(10 * time.Minute)
	n2 := clock.Now().Add(40 * time.Minute)
	if _, err := st.Create(ctx, expiring("default", "intent-ext", n1)); err != nil {
		t.Fatal(err)
	}
	t.Run("a replay with a later not_after survives the compaction that would have dropped the key", func(t *testing.T) {
		clock.Advance(12 * time.Minute)
		if r, err := st.Create(ctx, expiring("default", "intent-ext", n2)); err != nil || r.Outcome != OutcomeReplayed {
			t.Fatalf("%+v, %v", r, err)
		}
		clock.Advance(10 * time.Minute) // past n1 + allowance
		if r := compact(t, st); r.KeysCompacted != 0 {
			t.Fatalf("compacted %+v", r)
		}
		fr, ok := keyOf(t, st, "default", "intent-ext")
		if !ok || fr.KeepUntil != n2.Add(allowance).Format(time.RFC3339Nano) {
			t.Fatalf("key %+v, %v; want keep_until %s", fr, ok, n2.Add(allowance))
		}
	})
	t.Run("a conflict with a later not_after extends the key too", func(t *testing.T) {
		req := expiring("default", "intent-ext", n2.Add(time.Hour))
		other := scoped("default", "intent-ext", "another title")
		other.NotAfter = req.NotAfter
		if r, err := st.Create(ctx, other); err != nil || r.Outcome != OutcomeConflict {
			t.Fatalf("%+v, %v", r, err)
		}
		if fr, _ := keyOf(t, st, "default", "intent-ext"); fr.KeepUntil != n2.Add(time.Hour+allowance).Format(time.RFC3339Nano) {
			t.Fatalf("keep_until %s after the conflict", fr.KeepUntil)
		}
	})
	t.Run("a replay with an earlier not_after does not shorten it", func(t *testing.T) {
		if _, err := st.Create(ctx, expiring("default", "intent-ext", n1)); err != nil {
			t.Fatal(err)
		}
		if fr, _ := keyOf(t, st, "default", "intent-ext"); fr.KeepUntil != n2.Add(time.Hour+allowance).Format(time.RFC3339Nano) {
			t.Fatalf("keep_until %s after an earlier approval", fr.KeepUntil)
		}
	})
	t.Run("a replay and a compaction in one group: the replay decided first keeps the key", func(t *testing.T) {
		n3 := clock.Now().Add(time.Minute)
		if _, err := st.Create(ctx, expiring("default", "intent-group", n3)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute + allowance + time.Second) // the key's entry is due
		n4 := clock.Now().Add(time.Hour)
		req, refused, err := checkCreate(expiring("default", "intent-group", n4))
		if err != nil || refused != nil {
			t.Fatal(err, refused)
		}
		var replay CreateResponse
		var maint CompactResult
		// The writer is idle: this test goroutine stands in for it.
		st.commitGroup([]writerOp{
			&createCall{req: req, done: func(r CreateResponse, err error) { replay = r }},
			&compactCall{done: func(r CompactResult, err error) { maint = r }},
		})
		if replay.Outcome != OutcomeReplayed || maint.KeysCompacted != 0 {
			t.Fatalf("replay %+v, compaction %+v; want the key kept", replay, maint)
		}
		if fr, ok := keyOf(t, st, "default", "intent-group"); !ok || fr.KeepUntil != n4.Add(allowance).Format(time.RFC3339Nano) {
			t.Fatalf("key %+v, %v after the group", fr, ok)
		}
		if r := compact(t, st); r.KeysCompacted != 0 {
			t.Fatalf("a later compaction dropped the extended key: %+v", r)
		}
	})
}

func TestCompactionRunsWhileCreatesAreAnswered(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: time.Minute, KeyMargin: -1,
		CompactEvery: time.Millisecond, CompactChunk: 16})
	ctx := ctxT(t)
	const nExpiring, live = 400, 200
	for i := range nExpiring {
		if _, err := st.Create(ctx, expiring("old", fmt.Sprintf("intent-%d", i), clock.Now().Add(time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour) // every "old" key is now due; the background compaction takes them
	far := clock.Now().Add(24 * time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range live {
				if i%8 != w {
					continue
				}
				for _, want := range []string{OutcomeCreated, OutcomeReplayed} {
					r, err := st.Create(ctx, expiring("new", fmt.Sprintf("intent-%d", i), far))
					if err != nil || r.Outcome != want {
						t.Errorf("create %d: %+v, %v; want %s", i, r, err, want)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := st.Compact(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	compact(t, st)
	keys, scopes := st.KeyStats()
	if keys.Compacted != nExpiring || keys.Live != live {
		t.Errorf("keys %+v; want %d compacted, %d live", keys, nExpiring, live)
	}
	if c := st.Stats(); c != counts(nExpiring+2*live, nExpiring+live, nExpiring+live) {
		t.Errorf("counts %+v", c)
	}
	if len(scopes) != 2 || scopes[0].Scope != "new" || scopes[0].KeysLive != live || scopes[1].KeysCompacted != nExpiring {
		t.Errorf("scopes %+v", scopes)
	}
}

func TestRecordsRetentionRemovesOldRequestAndCreateRecordsOnly(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, t.TempDir(), Options{Clock: clock.Now, RecordsRetention: time.Hour, CompactEvery: -1, CompactChunk: 3})
	ctx := ctxT(t)
	for i := range 5 {
		req := expiring("default", fmt.Sprintf("intent-%d", i), time.Time{})
		for range 2 {
			if _, err := st.Create(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(30 * time.Minute)
	if _, err := st.Create(ctx, expiring("default", "intent-late", time.Time{})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(31 * time.Minute)
	r := compact(t, st)
	if r.RecordsRetired != 15 || r.KeysCompacted != 0 {
		t.Fatalf("compaction %+v; want the 10 old requests and 5 old creates retired", r)
	}
	reqs := allRecords(t, st, RecordRequests, "")
	creates := allRecords(t, st, RecordCreates, "")
	if len(reqs.Requests) != 1 || len(creates.Creates) != 1 || reqs.Requests[0].IntentID != "intent-late" {
		t.Errorf("left: %d requests, %d creates; want the late one of each", len(reqs.Requests), len(creates.Creates))
	}
	if byKey := allRecords(t, st, RecordRequests, "intent-0"); len(byKey.Requests) != 0 {
		t.Errorf("the index still names retired records: %+v", byKey.Requests)
	}
	tasks := allRecords(t, st, RecordTasks, "")
	intents := allRecords(t, st, RecordIntents, "")
	if len(tasks.Tasks) != 6 || len(intents.Intents) != 6 || st.Stats() != counts(11, 6, 6) {
		t.Errorf("tasks %d, keys %d, counts %+v: tasks, keys and counters must stay", len(tasks.Tasks), len(intents.Intents), st.Stats())
	}
	if keys, _ := st.KeyStats(); keys.RecordsRetired != 15 {
		t.Errorf("keys %+v; want 15 records retired", keys)
	}
	if r, err := st.Create(ctx, expiring("default", "intent-0", time.Time{})); err != nil || r.Outcome != OutcomeReplayed {
		t.Errorf("a resend after its records were retired: %+v, %v; want replayed (the key stays)", r, err)
	}
}

func TestTheContractCarriesScopeAndNotAfterToTheKey(t *testing.T) {
	clock := newTestClock()
	h := newHarness(t, Options{Clock: clock.Now, KeyClockAllowance: time.Minute, KeyMargin: time.Hour, CompactEvery: -1}, ServiceConfig{})
	req := scoped("team-x", "intent-contract", "call the supplier")
	notAfter := clock.Now().Add(30 * time.Minute).Truncate(time.Second)
	res, err := h.client.TaskService().Create(ctxT(t), taskservice.Request{Scope: "team-x", IntentID: req.IntentID,
		RequestDigest: req.RequestDigest, RequestID: req.RequestID, Task: taskservice.Task{Title: req.Task.Title},
		Request: req.Request, NotAfter: notAfter})
	if err != nil || res.Outcome != taskservice.Created {
		t.Fatalf("%+v, %v", res, err)
	}
	fr, ok := keyOf(t, h.st, "team-x", "intent-contract")
	if !ok || fr.KeepUntil != notAfter.Add(time.Minute+time.Hour).Format(time.RFC3339Nano) {
		t.Fatalf("key %+v, %v; want it in team-x, kept until not_after + allowance + margin", fr, ok)
	}
}

// TestACallForANewKeyWhoseDeadlineHasPassedIsRefused: a key the service
// does not know, whose deadline (not_after + allowance + margin) has
// passed by the service's clock, would be compacted at once, and a resend
// could create again: the call is refused, recorded, and creates nothing.
// A key the service knows is replayed whatever its deadline.
func TestACallForANewKeyWhoseDeadlineHasPassedIsRefused(t *testing.T) {
	allowance, margin := 5*time.Minute, time.Hour
	clock, st, first, known := keyOnClock(t, allowance, margin, "intent-known")
	ctx := ctxT(t)
	clock.Advance(10*time.Minute + allowance + margin + time.Second)

	t.Run("a new key whose not_after plus allowance and margin lies in the past is refused at key_deadline", func(t *testing.T) {
		late := clock.Now().Add(-allowance - margin - time.Second)
		_, err := st.Create(ctx, expiring("team-a", "intent-late", late))
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || re.Refusal.Check != CheckKeyDeadline || re.Refusal.Field != "not_after" {
			t.Fatalf("err %v; want a refusal at %s, not_after", err, CheckKeyDeadline)
		}
		if _, ok := keyOf(t, st, "team-a", "intent-late"); ok {
			t.Error("the refused call left a key")
		}
		if st.Stats() != counts(2, 1, 1) {
			t.Errorf("counts %+v; want 2 requests, 1 create, 1 task", st.Stats())
		}
	})
	t.Run("a new key whose deadline is exactly now is still created", func(t *testing.T) {
		edge := clock.Now().Add(-allowance - margin)
		got, err := st.Create(ctx, expiring("team-a", "intent-edge", edge))
		if err != nil || got.Outcome != OutcomeCreated {
			t.Fatalf("%+v, %v; want created", got, err)
		}
	})
	t.Run("a known key past its deadline, not yet compacted, is replayed", func(t *testing.T) {
		got, err := st.Create(ctx, expiring("team-a", "intent-known", known))
		if err != nil || got.Outcome != OutcomeReplayed || got.TaskID != first.TaskID {
			t.Fatalf("%+v, %v; want replayed %s", got, err, first.TaskID)
		}
	})
	t.Run("a key without a deadline is created whatever the clock", func(t *testing.T) {
		clock.Advance(24 * 365 * time.Hour)
		got, err := st.Create(ctx, expiring("team-a", "intent-forever", time.Time{}))
		if err != nil || got.Outcome != OutcomeCreated {
			t.Fatalf("%+v, %v; want created", got, err)
		}
	})
}

func TestTheStatsReplySaysHowLongKeysAndRecordsAreKept(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		opts                         Options
		allowance, margin, retention time.Duration
	}{
		{name: "defaults keep keys 5m plus 1h past their not_after and records forever", allowance: 5 * time.Minute, margin: time.Hour},
		{name: "flags set the allowance, the margin and the retention",
			opts:      Options{KeyClockAllowance: time.Minute, KeyMargin: 2 * time.Minute, RecordsRetention: 48 * time.Hour},
			allowance: time.Minute, margin: 2 * time.Minute, retention: 48 * time.Hour},
		{name: "a negative allowance and margin mean none", opts: Options{KeyClockAllowance: -1, KeyMargin: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts, ServiceConfig{})
			info, err := h.client.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if info.Lifetime == nil {
				t.Fatal("the stats reply has no lifetime")
			}
			a, m, r, err := info.Lifetime.Durations()
			if err != nil || a != tc.allowance || m != tc.margin || r != tc.retention {
				t.Fatalf("lifetime %+v reads %v, %v, %v, %v; want %v, %v, %v", *info.Lifetime, a, m, r, err, tc.allowance, tc.margin, tc.retention)
			}
		})
	}
	t.Run("a lifetime that is not three durations is refused by name", func(t *testing.T) {
		_, _, _, err := Lifetime{KeyClockAllowance: "5m", KeyMargin: "an hour", RecordsRetention: "0s"}.Durations()
		if !errors.Is(err, ErrBadLifetime) {
			t.Fatalf("got %v, want ErrBadLifetime", err)
		}
	})
}
