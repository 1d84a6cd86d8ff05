package history_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/taskservice"
)

const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func request(intent, ref string) taskservice.Request {
	return taskservice.Request{IntentID: intent, RequestDigest: digest, CallRef: ref, Task: taskservice.Task{Title: "t"}}
}

func open(t *testing.T, path string) *history.Recorder {
	t.Helper()
	r, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestTheRecorderPassesCallsAndResultsThroughUnchanged(t *testing.T) {
	lost := taskservice.Transient(errors.New("nats: timeout"))
	want := taskservice.Result{Outcome: taskservice.Replayed, TaskID: "task-1", StoreID: "store-1",
		Counts: &taskservice.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1}}
	tests := []struct {
		name string
		res  taskservice.Result
		err  error
	}{
		{name: "a result comes back as the service gave it", res: want},
		{name: "an error comes back as the very same value", err: lost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := open(t, filepath.Join(t.TempDir(), "calls.jsonl"))
			var got taskservice.Request
			svc := r.Wrap(taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
				got = req
				return tt.res, tt.err
			}))
			req := request("intent-a", "APPROVALS:1:1:1")
			res, err := svc.Create(context.Background(), req)
			if !errors.Is(err, tt.err) || res.Outcome != tt.res.Outcome || res.TaskID != tt.res.TaskID || res.Counts != tt.res.Counts {
				t.Fatalf("got %+v, %v; want %+v, %v", res, err, tt.res, tt.err)
			}
			if got.IntentID != req.IntentID || got.CallRef != req.CallRef || got.Task.Title != req.Task.Title {
				t.Fatalf("the service got %+v, want %+v", got, req)
			}
		})
	}
}

func TestACallIsRecordedWithItsResponseOrItsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	r := open(t, path)
	n := 0
	svc := r.Wrap(taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		n++
		switch n {
		case 1:
			return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1", StoreID: "store-1"}, nil
		case 2:
			return taskservice.Result{}, taskservice.Transient(errors.New("nats: timeout"))
		}
		return taskservice.Result{}, taskservice.Permanent(errors.New("no such collection"))
	}))
	before := time.Now()
	for _, ref := range []string{"ref-1", "ref-2", "ref-3"} {
		_, _ = svc.Create(context.Background(), request("intent-a", ref))
	}
	after := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Calls) != 3 || h.Sessions != 1 || h.Torn != 0 {
		t.Fatalf("%d calls, %d sessions, %d torn lines; want 3, 1, 0", len(h.Calls), h.Sessions, h.Torn)
	}
	c := h.Calls[0]
	if !c.Answered || c.Outcome != "created" || c.TaskID != "task-1" || c.StoreID != "store-1" || c.CallRef != "ref-1" ||
		c.IntentID != "intent-a" || c.RequestDigest != digest || c.File != path {
		t.Errorf("first call %+v", c)
	}
	for _, c := range h.Calls {
		if c.Sent.Before(before.Add(-time.Millisecond)) || c.Returned.Before(c.Sent) || c.Returned.After(after.Add(time.Millisecond)) {
			t.Errorf("call %s: sent %s returned %s, outside [%s, %s]", c.CallRef, c.Sent, c.Returned, before, after)
		}
	}
	if c := h.Calls[1]; c.Answered || c.Known() || c.Err != "nats: timeout" || c.ErrClass != "transient" {
		t.Errorf("second call %+v, want a transient error without a response", c)
	}
	if c := h.Calls[2]; c.Answered || c.ErrClass != "permanent" {
		t.Errorf("third call %+v, want a permanent error without a response", c)
	}
}

// A call under way when its process dies leaves its invocation on disk
// without a response: the file is read while the call still hangs.
func TestACallThatNeverReturnsLeavesItsInvocationWithoutResponse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	r := open(t, path)
	entered, release := make(chan struct{}), make(chan struct{})
	svc := r.Wrap(taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		close(entered)
		<-release
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1"}, nil
	}))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = svc.Create(context.Background(), request("intent-a", "ref-1")) }()
	<-entered
	h, err := history.Read(path)
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Calls) != 1 || h.Calls[0].Known() || !h.Calls[0].Returned.IsZero() || h.Calls[0].Err != "" {
		t.Fatalf("calls %+v, want one invocation without a response", h.Calls)
	}
}

func TestFilesOfSeveralProcessesMergeInTheOrderCallsWereSent(t *testing.T) {
	dir := t.TempDir()
	ok := taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-" + req.IntentID}, nil
	})
	var paths []string
	var wg sync.WaitGroup
	for p := range 3 {
		path := filepath.Join(dir, "exec-"+string(rune('1'+p))+".jsonl")
		paths = append(paths, path)
		r := open(t, path)
		svc := r.Wrap(ok)
		wg.Go(func() {
			for i := range 50 {
				_, _ = svc.Create(context.Background(), request("intent-"+string(rune('a'+p)), "ref-"+string(rune('0'+i%10))))
			}
		})
	}
	wg.Wait()
	// A process started later on the same file appends a second session.
	second := open(t, paths[0])
	_, _ = second.Wrap(ok).Create(context.Background(), request("intent-z", "ref-z"))
	h, err := history.Read(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Calls) != 151 || h.Sessions != 4 {
		t.Fatalf("%d calls in %d sessions, want 151 in 4", len(h.Calls), h.Sessions)
	}
	ids := map[string]bool{}
	for i, c := range h.Calls {
		if i > 0 && c.Sent.Before(h.Calls[i-1].Sent) {
			t.Fatalf("call %d sent before call %d", i, i-1)
		}
		if ids[c.ID] {
			t.Fatalf("call id %s twice", c.ID)
		}
		ids[c.ID] = true
	}
	if last := h.Calls[len(h.Calls)-1]; last.IntentID != "intent-z" || !strings.HasPrefix(last.ID, second.Session()) {
		t.Fatalf("last call %+v, want intent-z from the second session", last)
	}
}

func TestATornLineIsToleratedOnlyAtTheEndOfASession(t *testing.T) {
	session := `{"kind":"session","session":"s1","pid":1,"at":1}` + "\n"
	call := `{"kind":"call","id":"s1-1","at":2,"intent_id":"intent-a","request_digest":"` + digest + `"}` + "\n"
	torn := `{"kind":"return","id":"s1-1","at":3,"outc`
	tests := []struct {
		name    string
		text    string
		torn    int
		wantErr string
	}{
		{name: "a torn last line is counted and the call stays without response", text: session + call + torn, torn: 1},
		{name: "a torn line before the next session is counted", text: session + call + torn + "\n" +
			strings.ReplaceAll(session, "s1", "s2"), torn: 1},
		{name: "a torn line in the middle of a session is refused", text: session + call + torn + "\n" + call,
			wantErr: "line 3"},
		{name: "a response to a call never made is refused", text: session +
			`{"kind":"return","id":"s1-9","at":3,"outcome":"created","task_id":"t"}` + "\n", wantErr: "never made"},
		{name: "an unknown member is refused", text: session + `{"kind":"call","id":"s1-1","at":2,"extra":1}` + "\n" + call,
			wantErr: "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := history.ReadFrom(strings.NewReader(tt.text), "calls.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "history: ") {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Torn != tt.torn || len(h.Calls) != 1 || h.Calls[0].Known() {
				t.Fatalf("torn %d, calls %+v", h.Torn, h.Calls)
			}
		})
	}
}

func TestOpeningAFileWithATornLastLineEndsItFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	if err := os.WriteFile(path, []byte(`{"kind":"session","session":"s1","pid":1,"at":1}`+"\n"+`{"kind":"call","id":"s1-1","at":2,"int`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := open(t, path)
	_, _ = r.Wrap(taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1"}, nil
	})).Create(context.Background(), request("intent-a", "ref-1"))
	h, err := history.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Torn != 1 || h.Sessions != 2 || len(h.Calls) != 1 || !h.Calls[0].Known() {
		t.Fatalf("torn %d, sessions %d, calls %+v", h.Torn, h.Sessions, h.Calls)
	}
}

func TestALineThatCannotBeWrittenIsReportedAndTheCallStillGoesAhead(t *testing.T) {
	r := open(t, filepath.Join(t.TempDir(), "calls.jsonl"))
	var reported error
	r.OnError = func(err error) { reported = err }
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	called := false
	res, err := r.Wrap(taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		called = true
		return taskservice.Result{Outcome: taskservice.Created, TaskID: "task-1"}, nil
	})).Create(context.Background(), request("intent-a", "ref-1"))
	if !called || err != nil || res.TaskID != "task-1" {
		t.Fatalf("called %v, result %+v, err %v", called, res, err)
	}
	if reported == nil || r.Err() == nil || !strings.HasPrefix(r.Err().Error(), "history: ") {
		t.Fatalf("reported %v, Err %v; want the lost line reported", reported, r.Err())
	}
}

func TestDeletesRoundTripThroughAHistoryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	rec := open(t, path)
	del := rec.WrapDelete(func(context.Context, string) error { return nil })
	if err := del(context.Background(), "intent-a"); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Calls) != 1 || h.Calls[0].Op != history.OpDelete || !h.Calls[0].Answered || h.Calls[0].Outcome != history.Deleted {
		t.Errorf("read back %+v; want one answered delete", h.Calls)
	}
}
