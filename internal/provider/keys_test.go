package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// keyID is a key (scope, intent id) as the tests name it.
type keyID struct{ scope, intent string }

// scopedRecords reads every record of one kind for one key (all keys when
// its intent id is ""), following pages of limit records.
func scopedRecords(tb testing.TB, st *Store, kind string, k keyID, limit int) RecordsResponse {
	tb.Helper()
	out := RecordsResponse{Kind: kind}
	var after uint64
	for {
		page, err := st.Records(RecordsRequest{Kind: kind, Scope: k.scope, IntentID: k.intent, AfterSeq: after, Limit: limit})
		if err != nil {
			tb.Fatalf("records %s of %v after %d: %v", kind, k, after, err)
		}
		out.Requests = append(out.Requests, page.Requests...)
		out.Creates = append(out.Creates, page.Creates...)
		out.Tasks = append(out.Tasks, page.Tasks...)
		out.Intents = append(out.Intents, page.Intents...)
		out.Deletes = append(out.Deletes, page.Deletes...)
		if page.NextSeq == 0 {
			return out
		}
		after = page.NextSeq
	}
}

// filterByKey keeps the records of list whose key is k.
func filterByKey[R any](list []R, k keyID, keyOf func(R) keyID) []R {
	var out []R
	for _, r := range list {
		if keyOf(r) == k {
			out = append(out, r)
		}
	}
	return out
}

// checkKeyListings checks that every key's records, listed by key (in
// pages of 1, 2 and 7), are exactly its records in the full listings, in
// order: the per-key index, written or implied, names each record once.
func checkKeyListings(tb testing.TB, st *Store) {
	tb.Helper()
	reqs := allRecords(tb, st, RecordRequests, "").Requests
	creates := allRecords(tb, st, RecordCreates, "").Creates
	tasks := allRecords(tb, st, RecordTasks, "").Tasks
	deletes := allRecords(tb, st, RecordDeletes, "").Deletes
	keys := map[keyID]bool{}
	for _, r := range reqs {
		keys[keyID{r.Scope, r.IntentID}] = true
	}
	for _, t := range tasks {
		keys[keyID{t.Scope, t.IntentID}] = true
	}
	for k := range keys {
		want := RecordsResponse{
			Requests: filterByKey(reqs, k, func(r RequestRecord) keyID { return keyID{r.Scope, r.IntentID} }),
			Creates:  filterByKey(creates, k, func(r CreateRecord) keyID { return keyID{r.Scope, r.IntentID} }),
			Tasks:    filterByKey(tasks, k, func(r TaskRecord) keyID { return keyID{r.Scope, r.IntentID} }),
			Deletes:  filterByKey(deletes, k, func(r DeleteRecord) keyID { return keyID{r.Scope, r.IntentID} }),
		}
		for _, limit := range []int{1, 2, 7} {
			got := RecordsResponse{
				Requests: scopedRecords(tb, st, RecordRequests, k, limit).Requests,
				Creates:  scopedRecords(tb, st, RecordCreates, k, limit).Creates,
				Tasks:    scopedRecords(tb, st, RecordTasks, k, limit).Tasks,
				Deletes:  scopedRecords(tb, st, RecordDeletes, k, limit).Deletes,
			}
			if !reflect.DeepEqual(got, want) {
				tb.Errorf("key %v listed in pages of %d:\n%+v\nwant its records of the full listings:\n%+v", k, limit, got, want)
			}
		}
	}
}

// indexEntries counts the written per-key index entries.
func indexEntries(tb testing.TB, st *Store) int {
	tb.Helper()
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}})
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// keyHistory creates, on a test clock, keys that expire and keys kept
// forever in two scopes, replays and conflicts, refusals (a task that
// differs from its request; a new key whose deadline passed) and deletes
// of tasks by key and by task id, then moves the clock by the hour.
func keyHistory(t *testing.T, st *Store, clock *testClock) {
	t.Helper()
	ctx := ctxT(t)
	soon := clock.Now().Add(10 * time.Minute)
	for i := range 6 {
		scope := []string{"default", "team-a"}[i%2]
		notAfter := time.Time{}
		if i < 3 {
			notAfter = soon
		}
		req := expiring(scope, fmt.Sprintf("intent-%d", i), notAfter)
		for range 1 + i%3 { // created, then replayed
			if _, err := st.Create(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		if i == 4 {
			conflict := scoped(scope, req.IntentID, "another task")
			conflict.NotAfter = req.NotAfter
			if r, err := st.Create(ctx, conflict); err != nil || (r.Outcome != OutcomeConflict && !st.unsafe) {
				t.Fatalf("conflict: %+v, %v", r, err)
			}
		}
	}
	differs := scoped("team-a", "intent-refused", "the task asked")
	differs.Task.Title = "not the task of the request"
	if _, err := st.Create(ctx, differs); err == nil {
		t.Fatal("a create whose task differs from its request was not refused")
	}
	if _, err := st.Create(ctx, expiring("team-a", "intent-late", clock.Now().Add(-24*time.Hour))); err == nil && !st.unsafe {
		t.Fatal("a new key whose deadline passed was not refused")
	}
	if _, err := st.Delete(ctx, DeleteRequest{Scope: "team-a", IntentID: "intent-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, DeleteRequest{TaskID: FormatTaskID(6)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
}

func TestEveryKeysRecordsAreListedUnderItOnceAndInOrder(t *testing.T) {
	cases := []struct {
		name      string
		unsafe    bool
		retention time.Duration
		// then runs after the history: compaction, retirement, more.
		then func(t *testing.T, st *Store, clock *testClock)
	}{
		{name: "new keys, replays, conflicts, refusals and deletes"},
		{name: "the unsafe mode's later creates of a key, and deletes of its first and later tasks", unsafe: true,
			then: func(t *testing.T, st *Store, _ *testClock) {
				if _, err := st.Delete(ctxT(t), DeleteRequest{TaskID: FormatTaskID(7)}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "keys compacted after their approvals expired keep their records listed",
			then: func(t *testing.T, st *Store, clock *testClock) {
				clock.Advance(3 * time.Hour)
				if r := compact(t, st); r.KeysCompacted != 3 {
					t.Fatalf("compaction %+v; want the 3 expiring keys", r)
				}
			}},
		{name: "records retired leave their keys' listings, compacted keys or live", retention: 2 * time.Hour,
			then: func(t *testing.T, st *Store, clock *testClock) {
				clock.Advance(3 * time.Hour)
				if _, err := st.Create(ctxT(t), expiring("team-a", "intent-3", time.Time{})); err != nil {
					t.Fatal(err)
				}
				if r := compact(t, st); r.KeysCompacted != 3 || r.RecordsRetired == 0 {
					t.Fatalf("compaction %+v; want 3 keys compacted and old records retired", r)
				}
			}},
		{name: "keys compacted after their records were retired list none of them", retention: 30 * time.Minute,
			then: func(t *testing.T, st *Store, clock *testClock) {
				if r := compact(t, st); r.KeysCompacted != 0 || r.RecordsRetired == 0 {
					t.Fatalf("compaction %+v; want old records retired and no key compacted yet", r)
				}
				clock.Advance(3 * time.Hour)
				if r := compact(t, st); r.KeysCompacted != 3 {
					t.Fatalf("compaction %+v; want the 3 expiring keys", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			st := openStore(t, t.TempDir(), Options{Clock: clock.Now, UnsafeCreateEveryCall: tc.unsafe, RecordsRetention: tc.retention, CompactEvery: -1, CompactChunk: 2})
			keyHistory(t, st, clock)
			if tc.then != nil {
				tc.then(t, st, clock)
			}
			checkKeyListings(t, st)
		})
	}
}

func TestANewKeyWritesNoIndexEntryAndLaterRecordsDo(t *testing.T) {
	st := openStore(t, t.TempDir(), Options{})
	ctx := ctxT(t)
	for i := range 5 {
		if _, err := st.Create(ctx, newRequest(fmt.Sprintf("intent-%d", i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := indexEntries(t, st); n != 0 {
		t.Errorf("5 new keys wrote %d index entries; want none, their intent records stand for them", n)
	}
	if _, err := st.Create(ctx, newRequest("intent-0", "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, DeleteRequest{IntentID: "intent-1"}); err != nil {
		t.Fatal(err)
	}
	if n := indexEntries(t, st); n != 2 {
		t.Errorf("a replay and a delete left %d index entries; want 2", n)
	}
	checkKeyListings(t, st)
}

// writeWrittenIndex turns the store in dir into one of layout version 2,
// as the service wrote it before the index was implied: every key's
// implied entries written beside its intent record, and the meta record at
// version 2. It returns how many entries it wrote.
func writeWrittenIndex(t *testing.T, dir string) int {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{log: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIntent}, UpperBound: []byte{prefixIntent + 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	written := 0
	for ok := it.First(); ok; ok = it.Next() {
		var fr FirstResult
		if found, err := getJSON(db, it.Key(), &fr); err != nil || !found {
			t.Fatalf("intent %q: %v", it.Key(), err)
		}
		for _, kind := range []byte{prefixRequest, prefixCreate, prefixTask} {
			if seq := impliedEntry(fr, kind); seq != 0 {
				if err := b.Set(indexKey(fr.Scope, fr.IntentID, kind, seq), nil, nil); err != nil {
					t.Fatal(err)
				}
				written++
			}
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	m, _, err := loadMeta(db)
	if err != nil {
		t.Fatal(err)
	}
	m.Format = metaFormatIndexWritten
	val, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte{prefixMeta}, val, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return written
}

// storedFormat reads the layout version in the store's meta record.
func storedFormat(t *testing.T, st *Store) int {
	t.Helper()
	val, _, err := getRaw(st.db, []byte{prefixMeta})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(val, &m); err != nil {
		t.Fatal(err)
	}
	return m.Format
}

func TestAStoreOfLayout2IsReadAsItIsAndSaysLayout3AfterItsNextCommit(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	opts := Options{Clock: clock.Now, CompactEvery: -1}
	st := openStore(t, dir, opts)
	keyHistory(t, st, clock)
	intents := allRecords(t, st, RecordIntents, "").Intents
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Three entries per key, but none for the two tasks deleted.
	if n := writeWrittenIndex(t, dir); n != 3*len(intents)-2 {
		t.Fatalf("wrote %d index entries for %d keys; want 3 each, less the 2 deleted tasks'", n, len(intents))
	}
	st = openStore(t, dir, opts)
	t.Run("each key's records are listed once, an entry written and implied alike", func(t *testing.T) {
		checkKeyListings(t, st)
	})
	t.Run("its intents and counters are as they were", func(t *testing.T) {
		if got := allRecords(t, st, RecordIntents, "").Intents; !reflect.DeepEqual(got, intents) {
			t.Errorf("intents %+v; want %+v", got, intents)
		}
	})
	t.Run("it is still version 2 until a commit, then version 3", func(t *testing.T) {
		if f := storedFormat(t, st); f != 2 {
			t.Fatalf("layout %d before any commit; want 2 (opening rewrites nothing)", f)
		}
		if _, err := st.Create(ctxT(t), newRequest("intent-after", "x")); err != nil {
			t.Fatal(err)
		}
		if f := storedFormat(t, st); f != metaFormat {
			t.Errorf("layout %d after a create; want %d", f, metaFormat)
		}
	})
	t.Run("its keys are deleted and compacted as a new store's", func(t *testing.T) {
		if _, err := st.Delete(ctxT(t), DeleteRequest{IntentID: "intent-0"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(3 * time.Hour)
		if r := compact(t, st); r.KeysCompacted != 3 {
			t.Fatalf("compaction %+v; want the 3 expiring keys", r)
		}
		checkKeyListings(t, st)
	})
}

func TestAStoreOfAnUnknownLayoutIsRefused(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir, Options{})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{log: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte{prefixMeta}, []byte(`{"format":4,"store_id":"store-00000000000000aa"}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Logger: quietLogger()}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "layout version 4") {
		t.Fatalf("open of layout 4: %v; want ErrCorrupt naming the version", err)
	}
}
