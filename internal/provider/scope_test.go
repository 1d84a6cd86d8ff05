package provider

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sendtwice/sendtwice/internal/document"
)

func scoped(scope, intent, title string) CreateRequest {
	req, err := NewScopedRequest(scope, intent, Task{Title: title})
	if err != nil {
		panic(err)
	}
	return req
}

func TestScopesKeyTheSameIntentIDApart(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	ctx := ctxT(t)
	a1, err := h.client.Create(ctx, scoped("team-a", "intent-1", "write the notes"))
	if err != nil {
		t.Fatal(err)
	}
	b1, err := h.client.Create(ctx, scoped("team-b", "intent-1", "write the notes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("two scopes using one intent id get two tasks", func(t *testing.T) {
		if a1.Outcome != OutcomeCreated || b1.Outcome != OutcomeCreated || a1.TaskID == b1.TaskID {
			t.Fatalf("team-a %s %s, team-b %s %s; want two created tasks", a1.Outcome, a1.TaskID, b1.Outcome, b1.TaskID)
		}
		if a1.First.Scope != "team-a" || b1.First.Scope != "team-b" {
			t.Errorf("first results name scopes %q and %q", a1.First.Scope, b1.First.Scope)
		}
	})
	t.Run("a replay answers its own scope's task, never another's", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 8 {
			for _, want := range []CreateResponse{a1, b1} {
				wg.Go(func() {
					got, err := h.client.Create(ctx, scoped(want.First.Scope, "intent-1", "write the notes"))
					if err != nil || got.Outcome != OutcomeReplayed || got.TaskID != want.TaskID || got.First.Scope != want.First.Scope {
						t.Errorf("replay in %s: %+v, %v; want replayed %s", want.First.Scope, got, err, want.TaskID)
					}
				})
			}
		}
		wg.Wait()
	})
	t.Run("a request naming no scope lands in default", func(t *testing.T) {
		got, err := h.client.Create(ctx, newRequest("intent-1", "write the notes"))
		if err != nil || got.Outcome != OutcomeCreated || got.First.Scope != "default" {
			t.Fatalf("%+v, %v; want created in default", got, err)
		}
	})
	t.Run("the counters are kept per scope beside the totals", func(t *testing.T) {
		info, err := h.client.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []ScopeCounts{
			{Scope: "default", Counts: counts(1, 1, 1), KeysLive: 1},
			{Scope: "team-a", Counts: counts(9, 1, 1), KeysLive: 1},
			{Scope: "team-b", Counts: counts(9, 1, 1), KeysLive: 1},
		}
		if info.Counts != counts(19, 3, 3) || !reflect.DeepEqual(info.Scopes, want) || info.Keys.Live != 3 {
			t.Errorf("stats %+v; want totals 19, 3, 3 and scopes %+v", info, want)
		}
	})
	t.Run("records can be read for one scope or one key", func(t *testing.T) {
		page, err := h.client.Records(ctx, RecordsRequest{Kind: RecordRequests, Scope: "team-b"})
		if err != nil || len(page.Requests) != 9 {
			t.Fatalf("team-b requests: %d, %v; want 9", len(page.Requests), err)
		}
		for _, r := range page.Requests {
			if r.Scope != "team-b" || r.TaskID != b1.TaskID {
				t.Errorf("team-b's records hold %+v", r)
			}
		}
		page, err = h.client.Records(ctx, RecordsRequest{Kind: RecordTasks, Scope: "team-a", IntentID: "intent-1"})
		if err != nil || len(page.Tasks) != 1 || page.Tasks[0].TaskID != a1.TaskID {
			t.Fatalf("team-a's task of intent-1: %+v, %v", page.Tasks, err)
		}
		page, err = h.client.Records(ctx, RecordsRequest{Kind: RecordIntents, Scope: "team-a"})
		if err != nil || len(page.Intents) != 1 || page.Intents[0].TaskID != a1.TaskID {
			t.Fatalf("team-a's intents: %+v, %v", page.Intents, err)
		}
	})
}

func TestBadScopesAreRefused(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	ctx := ctxT(t)
	cases := []struct {
		name   string
		edit   func(*CreateRequest)
		reason string
	}{
		{"a scope with an upper-case letter is refused unrecorded", func(r *CreateRequest) { r.Scope = "Team" }, "scope"},
		{"a scope with a dot (two subject tokens) is refused unrecorded", func(r *CreateRequest) { r.Scope = "a.b" }, "scope"},
		{"a not_after that is not RFC 3339 is refused unrecorded", func(r *CreateRequest) { r.NotAfter = "tomorrow" }, "not_after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := scoped("team-a", "intent-bad", "x")
			tc.edit(&req)
			_, err := h.client.Create(ctx, req)
			var se *ServiceError
			if !errors.As(err, &se) || se.Code != CodeBadRequest || !strings.Contains(se.Description, tc.reason) {
				t.Fatalf("error %v; want a 400 naming %s", err, tc.reason)
			}
		})
	}
	t.Run("a call whose scope differs from its request's is refused and recorded", func(t *testing.T) {
		req := scoped("team-a", "intent-bad", "x")
		req.Scope = "team-b"
		_, err := h.client.Create(ctx, req)
		var se *ServiceError
		if !errors.As(err, &se) || se.Code != CodeBadRequest || !strings.Contains(se.Description, CheckRequestBinding+" failed at scope") {
			t.Fatalf("error %v; want the binding refused at scope", err)
		}
	})
	if c := h.st.Stats(); c != counts(1, 0, 0) {
		t.Errorf("counts %+v; want only the refused binding recorded", c)
	}
}

// writeUnscopedStore writes a store in layout version 1 (keys by intent id
// alone), as the service wrote it before scopes: one intent created and
// replayed once.
func writeUnscopedStore(t *testing.T, dir string, req CreateRequest) FirstResult {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(key []byte, v any) {
		var val []byte
		if v != nil {
			if val, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Set(key, val, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	seq := func(kind byte, n uint64) []byte { return binary.BigEndian.AppendUint64([]byte{kind}, n) }
	idx := func(kind byte, n uint64) []byte {
		return binary.BigEndian.AppendUint64(append(append([]byte{'x'}, req.IntentID...), 0, kind), n)
	}
	at := "2026-01-02T03:04:05Z"
	fr := FirstResult{IntentID: req.IntentID, RequestDigest: req.RequestDigest, RequestID: req.RequestID, TaskID: "fake-task-0001", CreatedAt: at, RequestSeq: 1}
	set([]byte{'m'}, map[string]any{"format": 1, "store_id": "store-00000000000000aa", "requests_received": 2, "creates_executed": 1, "tasks_existing": 1, "last_task_number": 1})
	for n := uint64(1); n <= 2; n++ {
		outcome := OutcomeCreated
		if n == 2 {
			outcome = OutcomeReplayed
		}
		set(seq('r', n), map[string]any{"seq": n, "intent_id": req.IntentID, "request_digest": req.RequestDigest, "outcome": outcome, "task_id": fr.TaskID, "received_at": at})
		set(idx('r', n), nil)
	}
	set(seq('c', 1), map[string]any{"seq": 1, "intent_id": req.IntentID, "request_digest": req.RequestDigest, "task_id": fr.TaskID, "request_seq": 1, "created_at": at})
	set(idx('c', 1), nil)
	set(seq('t', 1), map[string]any{"seq": 1, "task_id": fr.TaskID, "intent_id": req.IntentID, "task": req.Task, "created_at": at})
	set(idx('t', 1), nil)
	set(append([]byte{'i'}, req.IntentID...), fr)
	set(seq('o', 1), nil)
	if err := db.Set(seq('o', 1), []byte(req.IntentID), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fr.Scope = "default"
	return fr
}

func TestAStoreWithoutScopesIsMigratedIntoDefault(t *testing.T) {
	dir := t.TempDir()
	req := newRequest("intent-old", "an old task")
	first := writeUnscopedStore(t, dir, req)
	st := openStore(t, dir, Options{})
	ctx := ctxT(t)

	t.Run("the counters are kept and scope default holds them", func(t *testing.T) {
		keys, scopes := st.KeyStats()
		want := []ScopeCounts{{Scope: "default", Counts: counts(2, 1, 1), KeysLive: 1}}
		if st.Stats() != counts(2, 1, 1) || keys.Live != 1 || !reflect.DeepEqual(scopes, want) {
			t.Errorf("counts %+v, keys %+v, scopes %+v", st.Stats(), keys, scopes)
		}
	})
	t.Run("a resend of the old intent is replayed with its first task", func(t *testing.T) {
		got, err := st.Create(ctx, req)
		if err != nil || got.Outcome != OutcomeReplayed || got.TaskID != first.TaskID || got.First != first {
			t.Fatalf("%+v, %v; want replayed %+v", got, err, first)
		}
	})
	t.Run("the old intent's records are found under its key in default", func(t *testing.T) {
		reqs := allRecords(t, st, RecordRequests, "intent-old").Requests
		if len(reqs) != 3 || reqs[0].Scope != "default" {
			t.Errorf("requests of intent-old: %+v; want 3 in default", reqs)
		}
		if tasks := allRecords(t, st, RecordTasks, "intent-old").Tasks; len(tasks) != 1 || tasks[0].Scope != "default" {
			t.Errorf("tasks of intent-old: %+v", tasks)
		}
		if ints := allRecords(t, st, RecordIntents, "").Intents; len(ints) != 1 || ints[0] != first {
			t.Errorf("intents: %+v", ints)
		}
	})
	t.Run("a new intent gets the next task id", func(t *testing.T) {
		got, err := st.Create(ctx, newRequest("intent-new", "a new task"))
		if err != nil || got.Outcome != OutcomeCreated || got.TaskID != "fake-task-0002" {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("the same intent id in another scope is a new key", func(t *testing.T) {
		got, err := st.Create(ctx, scoped("team-a", "intent-old", "an old task"))
		if err != nil || got.Outcome != OutcomeCreated {
			t.Fatalf("%+v, %v", got, err)
		}
	})
}

func TestScopeRulesAreTheDocumentsRules(t *testing.T) {
	if DefaultScope != document.DefaultScope || MaxScopeBytes != document.MaxScopeBytes {
		t.Fatalf("default scope %q and bound %d; the documents say %q and %d", DefaultScope, MaxScopeBytes, document.DefaultScope, document.MaxScopeBytes)
	}
	for _, c := range []struct {
		scope string
		valid bool
	}{
		{"default", true}, {"a", true}, {"0", true}, {"team-a", true}, {"team_a", true}, {strings.Repeat("a", 64), true},
		{"", false}, {"-a", false}, {"_a", false}, {"A", false}, {"a.b", false}, {"a b", false}, {"a*", false},
		{"a>", false}, {"é", false}, {strings.Repeat("a", 65), false}, {"a\x00", false},
	} {
		if ValidScope(c.scope) != c.valid || document.ValidScope(c.scope) != c.valid {
			t.Errorf("ValidScope(%q): the service says %v, the documents %v; want %v", c.scope, ValidScope(c.scope), document.ValidScope(c.scope), c.valid)
		}
	}
}
