package caldav_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// request is a task request for intent with title; its digest depends on
// both, as a real request digest depends on the request's content.
func request(intent, title string) taskservice.Request {
	sum := sha256.Sum256([]byte(intent + "\x00" + title))
	return taskservice.Request{
		IntentID:      intent,
		RequestDigest: "sha256:" + hex.EncodeToString(sum[:]),
		RequestID:     "task-request-" + intent,
		Task:          taskservice.Task{Title: title},
		CallRef:       "APPROVALS:1:1:1",
		CandidateID:   "cand-0001",
		SourceVersion: "v1",
		ApprovedBy:    "reviewer@example.org",
	}
}

// vtodo is a calendar another client could write: one VTODO with uid.
func vtodo(uid, title string) []byte {
	return []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//another client//EN\r\nBEGIN:VTODO\r\nUID:" + uid +
		"\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:" + title + "\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
}

// startLedger starts an embedded JetStream server and opens the intent
// ledger in it.
func startLedger(t *testing.T) *ledger.Ledger {
	return testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
}

func adapter(t *testing.T, collectionURL string, cfg caldav.Config) *caldav.Adapter {
	t.Helper()
	cfg.CollectionURL = collectionURL
	if cfg.Timeout == 0 && cfg.HTTPClient == nil {
		cfg.Timeout = 10 * time.Second
	}
	a, err := caldav.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serverAndAdapter starts a server of kind k and an adapter on its
// collection.
func serverAndAdapter(t *testing.T, k davtest.Kind) (*davtest.Server, *caldav.Adapter) {
	t.Helper()
	s := davtest.Start(t, k, davtest.Options{})
	return s, adapter(t, s.CollectionURL, caldav.Config{})
}

func create(t *testing.T, a *caldav.Adapter, req taskservice.Request) taskservice.Result {
	t.Helper()
	res, err := a.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%s): %v", req.IntentID, err)
	}
	if err := taskservice.Check(res); err != nil {
		t.Fatalf("Create(%s): %v", req.IntentID, err)
	}
	if res.StoreID != a.StoreID() || res.Counts != nil {
		t.Errorf("Create(%s): store id %q, counts %v; want %q and none", req.IntentID, res.StoreID, res.Counts, a.StoreID())
	}
	return res
}

func listing(t *testing.T, a *caldav.Adapter) caldav.Listing {
	t.Helper()
	l, err := a.Tasks(context.Background())
	if err != nil {
		t.Fatalf("Tasks: %v", err)
	}
	return l
}

func resourcePath(t *testing.T, s *davtest.Server, intent string) (name, path string) {
	t.Helper()
	name, err := caldav.ResourceName(intent)
	if err != nil {
		t.Fatal(err)
	}
	return name, s.ResourcePath(name)
}

// counts checks the server's own numbers for one intent: PUT requests for
// its resource in the server's log, 201 answers to them, and .ics files in
// the collection's storage folder (all of them, not just this intent's).
func counts(t *testing.T, s *davtest.Server, intent string, puts, creates, stored int) {
	t.Helper()
	_, path := resourcePath(t, s, intent)
	if got := s.PUTs(path); got != puts {
		t.Errorf("PUT requests for %s in the %s log: %d, want %d", path, s.Kind, got, puts)
	}
	if got := s.Creates(path); got != creates {
		t.Errorf("201 answers for %s in the %s log: %d, want %d", path, s.Kind, got, creates)
	}
	if got := s.StoredNames(); len(got) != stored {
		t.Errorf(".ics files in the %s storage: %q, want %d", s.Kind, got, stored)
	}
}

func TestAgainstRealServers(t *testing.T) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			t.Parallel()
			davtest.Require(t, k)
			for _, sc := range scenarios {
				if sc.only != "" && sc.only != k {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, k)
				})
			}
		})
	}
}

var scenarios = []struct {
	name string
	only davtest.Kind
	run  func(t *testing.T, k davtest.Kind)
}{
	{"the same request sent twice is created, then replayed with the same task id", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		req := request("intent-0001", "補上通知設定的檢查項目")
		first := create(t, a, req)
		second := create(t, a, req)
		if first.Outcome != taskservice.Created || second.Outcome != taskservice.Replayed {
			t.Fatalf("outcomes %s, %s; want created, replayed", first.Outcome, second.Outcome)
		}
		if first.TaskID != "intent-0001" || second.TaskID != first.TaskID {
			t.Errorf("task ids %q, %q; want both intent-0001", first.TaskID, second.TaskID)
		}
		counts(t, s, req.IntentID, 2, 1, 1)
		l := listing(t, a)
		if l.VTODOs != 1 || len(l.Tasks) != 1 || l.Tasks[0].IntentID != req.IntentID || l.Tasks[0].TaskID != first.TaskID || l.Tasks[0].RequestDigest != req.RequestDigest {
			t.Errorf("Tasks: %+v", l)
		}
		name, _ := resourcePath(t, s, req.IntentID)
		// Both servers store the object as they serialize it, with long
		// lines folded (RFC 5545 §3.1).
		stored := strings.ReplaceAll(string(s.Stored(name)), "\r\n ", "")
		for _, want := range []string{"SUMMARY:補上通知設定的檢查項目", "X-SENDTWICE-REQUEST-DIGEST:" + req.RequestDigest, "X-SENDTWICE-APPROVED-BY:reviewer@example.org"} {
			if !strings.Contains(stored, want) {
				t.Errorf("the stored resource lacks %q:\n%s", want, stored)
			}
		}
		for _, never := range []string{"ATTENDEE", "DUE", "ASSIGNEE"} {
			if strings.Contains(stored, never) {
				t.Errorf("the stored resource has %s without an assignee or a due date:\n%s", never, stored)
			}
		}
	}},
	{"a changed request under the same intent is a conflict and leaves the first task byte for byte", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		first := create(t, a, request("intent-0002", "the first title"))
		name, _ := resourcePath(t, s, "intent-0002")
		before := s.Stored(name)
		changed := create(t, a, request("intent-0002", "a changed title"))
		if changed.Outcome != taskservice.Conflict || changed.TaskID != first.TaskID {
			t.Fatalf("changed request: %+v; want a conflict with task %s", changed, first.TaskID)
		}
		if after := s.Stored(name); !bytes.Equal(before, after) {
			t.Errorf("the first task's file changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		counts(t, s, "intent-0002", 2, 1, 1)
		if l := listing(t, a); len(l.Tasks) != 1 || l.Tasks[0].RequestDigest != request("intent-0002", "the first title").RequestDigest {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"two intents with the same content are two tasks", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		r1, r2 := request("intent-a", "same"), request("intent-b", "same")
		r2.RequestDigest = r1.RequestDigest
		x, y := create(t, a, r1), create(t, a, r2)
		if x.Outcome != taskservice.Created || y.Outcome != taskservice.Created || x.TaskID == y.TaskID {
			t.Fatalf("results %+v, %+v; want two created tasks", x, y)
		}
		counts(t, s, "intent-a", 1, 1, 2)
		counts(t, s, "intent-b", 1, 1, 2)
		if l := listing(t, a); l.VTODOs != 2 || len(l.Tasks) != 2 {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"64 concurrent creates of one intent make one task, once", "", func(t *testing.T, k davtest.Kind) {
		s := davtest.Start(t, k, davtest.Options{})
		a := adapter(t, s.CollectionURL, caldav.Config{Timeout: 30 * time.Second})
		req := request("intent-concurrent", "one task, many senders")
		const n = 64
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]taskservice.Result, n)
			errs    = make([]error, n)
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = a.Create(context.Background(), req)
			}()
		}
		close(start)
		wg.Wait()
		outcomes := map[taskservice.Outcome]int{}
		for i := range n {
			if errs[i] != nil {
				t.Errorf("call %d: %v", i, errs[i])
				continue
			}
			outcomes[results[i].Outcome]++
			if results[i].TaskID != req.IntentID {
				t.Errorf("call %d: task id %q", i, results[i].TaskID)
			}
		}
		t.Logf("%s: %d concurrent creates: %v", k, n, outcomes)
		if outcomes[taskservice.Created] != 1 || outcomes[taskservice.Replayed] != n-1 {
			t.Errorf("outcomes %v; want 1 created and %d replayed", outcomes, n-1)
		}
		counts(t, s, req.IntentID, n, 1, 1)
		if l := listing(t, a); l.VTODOs != 1 {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"a lost reply is a transient error and the retry is replayed", "", func(t *testing.T, k davtest.Kind) {
		s := davtest.Start(t, k, davtest.Options{})
		p := davtest.NewProxy(t, s.BaseURL)
		a := adapter(t, p.Rewrite(s.CollectionURL), caldav.Config{})
		req := request("intent-lost-reply", "the reply to this one is lost")
		p.DropResponses(1)
		_, err := a.Create(context.Background(), req)
		if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) {
			t.Fatalf("the call whose reply was lost: %v; want a transient error", err)
		}
		if p.Dropped() != 1 {
			t.Fatalf("the proxy dropped %d replies", p.Dropped())
		}
		_, path := resourcePath(t, s, req.IntentID)
		if got := s.Creates(path); got != 1 {
			t.Fatalf("the server answered 201 %d times to the lost call; want 1 (it did create)", got)
		}
		retry := create(t, a, req)
		if retry.Outcome != taskservice.Replayed || retry.TaskID != req.IntentID {
			t.Errorf("retry: %+v; want replayed", retry)
		}
		counts(t, s, req.IntentID, 2, 1, 1)
		if l := listing(t, a); l.VTODOs != 1 {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"a reply slower than the timeout is a transient error and the retry is replayed", "", func(t *testing.T, k davtest.Kind) {
		s := davtest.Start(t, k, davtest.Options{})
		p := davtest.NewProxy(t, s.BaseURL)
		a := adapter(t, p.Rewrite(s.CollectionURL), caldav.Config{Timeout: 500 * time.Millisecond})
		req := request("intent-slow-reply", "the reply to this one is late")
		p.StallResponses(1)
		_, err := a.Create(context.Background(), req)
		if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) {
			t.Fatalf("the call that timed out: %v; want a transient error", err)
		}
		// The retry gets a patient client: on a loaded machine the server
		// may take longer than the short timeout even without a stall.
		retry := create(t, adapter(t, p.Rewrite(s.CollectionURL), caldav.Config{}), req)
		if retry.Outcome != taskservice.Replayed {
			t.Errorf("retry: %+v; want replayed", retry)
		}
		counts(t, s, req.IntentID, 2, 1, 1)
	}},
	{"a server restarted between two calls replays, nothing lost", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		req := request("intent-restart", "survives a restart")
		first := create(t, a, req)
		s.Restart()
		second := create(t, a, req)
		if first.Outcome != taskservice.Created || second.Outcome != taskservice.Replayed || second.TaskID != first.TaskID {
			t.Fatalf("results %+v, %+v; want created, then replayed", first, second)
		}
		counts(t, s, req.IntentID, 2, 1, 1)
		if l := listing(t, a); l.VTODOs != 1 || len(l.Tasks) != 1 {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"a task deleted and then sent again is created again", "", func(t *testing.T, k davtest.Kind) {
		// The retention limit a probe reports: the server remembers an
		// intent id only as long as its resource exists. Measured on both
		// servers: once the task is deleted, a late resend of the same
		// approval creates it again (201), as a first call would.
		s, a := serverAndAdapter(t, k)
		req := request("intent-deleted", "deleted by a user")
		create(t, a, req)
		if err := a.Delete(context.Background(), req.IntentID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if l := listing(t, a); l.VTODOs != 0 {
			t.Fatalf("after Delete, Tasks: %+v", l)
		}
		again := create(t, a, req)
		if again.Outcome != taskservice.Created {
			t.Fatalf("the resend after a delete: %+v; measured before: created again", again)
		}
		counts(t, s, req.IntentID, 2, 2, 1)
		if err := a.Delete(context.Background(), "intent-never-made"); !errors.Is(err, caldav.ErrNoTask) {
			t.Errorf("Delete of a missing task: %v; want ErrNoTask", err)
		}
	}},
	{"one intent id in two scopes and the default scope is three tasks, each replayed in its own scope", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		want := map[string]struct{ taskID, name string }{
			"":       {"intent-0001", "intent-0001.ics"},
			"team-a": {"team-a~~intent-0001", "team-a~~intent-0001.ics"},
			"team-b": {"team-b~~intent-0001", "team-b~~intent-0001.ics"},
		}
		for _, scope := range []string{"", "team-a", "team-b"} {
			req := request("intent-0001", "one intent id, three scopes")
			req.Scope = scope
			first := create(t, a, req)
			again := create(t, a, req)
			if first.Outcome != taskservice.Created || again.Outcome != taskservice.Replayed || first.TaskID != want[scope].taskID || again.TaskID != first.TaskID {
				t.Errorf("scope %q: %+v then %+v; want created then replayed %q", scope, first, again, want[scope].taskID)
			}
			if s.Stored(want[scope].name) == nil {
				t.Errorf("scope %q: no resource %s in the storage (%q)", scope, want[scope].name, s.StoredNames())
			}
		}
		l := listing(t, a)
		if l.VTODOs != 3 || len(l.Tasks) != 3 {
			t.Fatalf("Tasks: %+v; want three", l)
		}
		for _, ti := range l.Tasks {
			sc := ti.Scope
			if sc == taskservice.DefaultScope {
				sc = ""
			}
			if ti.TaskID != want[sc].taskID {
				t.Errorf("listed %+v; want task id %q for scope %q", ti, want[sc].taskID, ti.Scope)
			}
		}
	}},
	{"Find reads a key without creating anything, and finds nothing once the task is deleted", "", func(t *testing.T, k davtest.Kind) {
		_, a := serverAndAdapter(t, k)
		ctx := context.Background()
		req := request("intent-find", "found, not made")
		req.Scope = "team-a"
		changed := request("intent-find", "a changed title")
		changed.Scope = "team-a"
		find := func(r taskservice.Request) (taskservice.Result, bool) {
			t.Helper()
			res, found, err := a.Find(ctx, r)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if res.StoreID != a.StoreID() {
				t.Errorf("Find: store id %q, want %q", res.StoreID, a.StoreID())
			}
			return res, found
		}
		if _, found := find(req); found {
			t.Fatal("Find before any create found a task")
		}
		if l := listing(t, a); l.VTODOs != 0 {
			t.Fatalf("Find created something: %+v", l)
		}
		created := create(t, a, req)
		if res, found := find(req); !found || res.Outcome != taskservice.Replayed || res.TaskID != created.TaskID {
			t.Errorf("Find of the same request: %+v, %v; want replayed %s", res, found, created.TaskID)
		}
		if res, found := find(changed); !found || res.Outcome != taskservice.Conflict || res.TaskID != created.TaskID {
			t.Errorf("Find of a changed request: %+v, %v; want a conflict with %s", res, found, created.TaskID)
		}
		other := req
		other.Scope = "team-b"
		if _, found := find(other); found {
			t.Error("Find in another scope found this scope's task")
		}
		if err := a.DeleteTask(ctx, "team-b", req.IntentID); !errors.Is(err, caldav.ErrNoTask) {
			t.Errorf("DeleteTask of another scope: %v; want ErrNoTask", err)
		}
		if err := a.DeleteTask(ctx, "team-a", req.IntentID); err != nil {
			t.Fatalf("DeleteTask: %v", err)
		}
		if _, found := find(req); found {
			t.Error("Find after the delete found the task")
		}
		if a.RemembersDeletedKeys() {
			t.Error("the adapter says its server remembers deleted keys; measured above: it does not")
		}
	}},
	{"with the intent ledger, a task deleted and sent again is replayed as deleted and not created again", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		ctx := context.Background()
		kept, err := taskservice.KeepDeletedKeys(a, startLedger(t))
		if err != nil {
			t.Fatal(err)
		}
		req := request("intent-deleted", "deleted by a user")
		req.NotAfter = time.Now().Add(time.Hour)
		first, err := kept.Create(ctx, req)
		if err != nil || first.Outcome != taskservice.Created {
			t.Fatalf("first call: %+v, %v", first, err)
		}
		if err := a.Delete(ctx, req.IntentID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		again, err := kept.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.Outcome != taskservice.Replayed || !again.TaskDeleted || again.TaskID != first.TaskID {
			t.Errorf("the resend after a delete: %+v; want replayed %s, task deleted", again, first.TaskID)
		}
		changed := request("intent-deleted", "a changed title")
		conflict, err := kept.Create(ctx, changed)
		if err != nil || conflict.Outcome != taskservice.Conflict || conflict.TaskID != first.TaskID {
			t.Errorf("a changed request after a delete: %+v, %v; want a conflict with %s", conflict, err, first.TaskID)
		}
		// One PUT (the create), one 201, nothing stored.
		counts(t, s, req.IntentID, 1, 1, 0)
	}},
	{"a resource someone else put at the intent's name is refused as not ours, left as it is", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		req := request("intent-taken", "ours")
		name, path := resourcePath(t, s, req.IntentID)
		if code := s.Put(path, vtodo("someone-elses-task", "not ours")); code != http.StatusCreated {
			t.Fatalf("the foreign PUT answered %d", code)
		}
		before := s.Stored(name)
		_, err := a.Create(context.Background(), req)
		if !errors.Is(err, caldav.ErrNotOurs) || !taskservice.IsPermanent(err) || !taskservice.IsNotCreated(err) ||
			!strings.Contains(err.Error(), "someone-elses-task") || !strings.Contains(err.Error(), "X-SENDTWICE-REQUEST-DIGEST") {
			t.Fatalf("Create: %v; want a permanent ErrNotOurs, nothing created, naming the foreign task and why", err)
		}
		t.Logf("error: %v", err)
		if after := s.Stored(name); !bytes.Equal(before, after) {
			t.Errorf("the foreign resource changed")
		}
		if err := a.Delete(context.Background(), req.IntentID); err == nil || s.Stored(name) == nil {
			t.Errorf("Delete removed a resource that is not ours: %v", err)
		}
		if l := listing(t, a); l.VTODOs != 1 || len(l.Tasks) != 0 {
			t.Errorf("Tasks: %+v; want one VTODO, none of ours", l)
		}
	}},
	{"an intent id with unsafe characters is encoded and round-trips", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		req := request("team/a b?#%", "unsafe characters")
		first, second := create(t, a, req), create(t, a, req)
		if first.Outcome != taskservice.Created || second.Outcome != taskservice.Replayed || first.TaskID != req.IntentID {
			t.Fatalf("results %+v, %+v", first, second)
		}
		name, _ := resourcePath(t, s, req.IntentID)
		if got := s.StoredNames(); len(got) != 1 || got[0] != name {
			t.Fatalf("stored %q; want [%s]", got, name)
		}
		if back, err := caldav.IntentIDFromResourceName(name); err != nil || back != req.IntentID {
			t.Errorf("the stored name decodes to %q, %v", back, err)
		}
		counts(t, s, req.IntentID, 2, 1, 1)
		if l := listing(t, a); len(l.Tasks) != 1 || l.Tasks[0].IntentID != req.IntentID || !strings.HasSuffix(l.Tasks[0].Href, name) {
			t.Errorf("Tasks: %+v", l)
		}
	}},
	{"a missing collection is a permanent error with the status", "", func(t *testing.T, k davtest.Kind) {
		s := davtest.Start(t, k, davtest.Options{})
		// A sibling of the test's collection, where the server would let
		// one be made.
		missing := strings.TrimSuffix(s.CollectionURL, "tasks/") + "missing/"
		a := adapter(t, missing, caldav.Config{})
		_, err := a.Create(context.Background(), request("intent-nowhere", "nowhere"))
		if !taskservice.IsPermanent(err) {
			t.Fatalf("Create into a missing collection: %v; want a permanent error", err)
		}
		// Xandikos answers 404; Radicale 409, as RFC 4918 answers a PUT
		// below a missing collection.
		want := map[davtest.Kind]string{davtest.Radicale: "409", davtest.Xandikos: "404"}[k]
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("error %q; want the status %s and what it means", err, want)
		}
		if _, err := a.Tasks(context.Background()); !taskservice.IsPermanent(err) {
			t.Errorf("Tasks of a missing collection: %v; want a permanent error", err)
		}
	}},
	{"a stopped server is a transient error", "", func(t *testing.T, k davtest.Kind) {
		s, a := serverAndAdapter(t, k)
		s.Stop()
		_, err := a.Create(context.Background(), request("intent-refused", "connection refused"))
		if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) {
			t.Fatalf("Create on a stopped server: %v; want a transient error", err)
		}
		if _, err := a.Tasks(context.Background()); err == nil || taskservice.IsPermanent(err) {
			t.Errorf("Tasks on a stopped server: %v; want a transient error", err)
		}
	}},
	{"a wrong password is a permanent error that does not show it", davtest.Radicale, func(t *testing.T, k davtest.Kind) {
		// Xandikos has no authentication of its own; Radicale checks an
		// htpasswd file.
		s := davtest.Start(t, k, davtest.Options{User: "alice", Password: "the right one"})
		good := adapter(t, s.CollectionURL, caldav.Config{Username: "alice", Password: "the right one"})
		if res := create(t, good, request("intent-auth", "with a password")); res.Outcome != taskservice.Created {
			t.Fatalf("with the right password: %+v", res)
		}
		bad := adapter(t, s.CollectionURL, caldav.Config{Username: "alice", Password: "a wrong one"})
		_, err := bad.Create(context.Background(), request("intent-auth-2", "with a wrong password"))
		if !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
			t.Fatalf("with a wrong password: %v; want a permanent error with 401", err)
		}
		if strings.Contains(err.Error(), "a wrong one") {
			t.Errorf("the error shows the password: %v", err)
		}
		if l := listing(t, good); l.VTODOs != 1 {
			t.Errorf("Tasks: %+v", l)
		}
		if _, err := bad.Tasks(context.Background()); !taskservice.IsPermanent(err) {
			t.Errorf("Tasks with a wrong password: %v; want a permanent error", err)
		}
	}},
}
