package provider

import (
	"errors"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

func TestADeletedTaskKeepsItsKey(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	ctx := ctxT(t)
	req := scoped("team-a", "intent-del", "file the report")
	first, err := h.client.Create(ctx, req)
	if err != nil || first.Outcome != OutcomeCreated {
		t.Fatalf("create: %+v, %v", first, err)
	}
	if _, err := h.client.Create(ctx, scoped("team-b", "intent-del", "file the report")); err != nil {
		t.Fatal(err)
	}

	t.Run("a delete by key takes one task away and keeps a delete record", func(t *testing.T) {
		resp, err := h.client.Delete(ctx, DeleteRequest{Scope: "team-a", IntentID: "intent-del"})
		if err != nil {
			t.Fatal(err)
		}
		d := resp.Deleted
		if d.TaskID != first.TaskID || d.Scope != "team-a" || d.IntentID != "intent-del" || d.Seq != 1 || resp.Counts != counts(2, 2, 1) {
			t.Fatalf("delete answered %+v; want %s deleted, counts 2, 2, 1", resp, first.TaskID)
		}
		if dels := allRecords(t, h.st, RecordDeletes, ""); len(dels.Deletes) != 1 || dels.Deletes[0] != d {
			t.Errorf("all delete records %+v; want %+v", dels.Deletes, d)
		}
		page, err := h.client.Records(ctx, RecordsRequest{Kind: RecordDeletes, Scope: "team-a", IntentID: "intent-del"})
		if err != nil || len(page.Deletes) != 1 || page.Deletes[0] != d {
			t.Errorf("delete records %+v, %v; want %+v", page.Deletes, err, d)
		}
		tasks, err := h.client.Records(ctx, RecordsRequest{Kind: RecordTasks, Scope: "team-a", IntentID: "intent-del"})
		if err != nil || len(tasks.Tasks) != 0 {
			t.Errorf("team-a's tasks of the intent after the delete: %+v, %v; want none", tasks.Tasks, err)
		}
		ints, err := h.client.Records(ctx, RecordsRequest{Kind: RecordIntents, Scope: "team-a", IntentID: "intent-del"})
		if err != nil || len(ints.Intents) != 1 || !ints.Intents[0].TaskDeleted || ints.Intents[0].TaskID != first.TaskID {
			t.Errorf("the key after the delete: %+v, %v; want it kept and marked deleted", ints.Intents, err)
		}
		info, err := h.client.Info(ctx)
		if err != nil || info.Keys.TasksDeleted != 1 || info.Keys.Live != 2 || info.Scopes[0].TasksExisting != 0 || info.Scopes[0].TasksDeleted != 1 ||
			info.Scopes[1].TasksExisting != 1 {
			t.Errorf("stats after the delete: %+v, %v", info, err)
		}
	})
	t.Run("a resend of the approval is replayed with the first task and the deleted mark, creating nothing", func(t *testing.T) {
		got, err := h.client.Create(ctx, req)
		if err != nil || got.Outcome != OutcomeReplayed || got.TaskID != first.TaskID || !got.TaskDeleted || got.Counts != counts(3, 2, 1) {
			t.Fatalf("resend: %+v, %v; want replayed %s deleted, counts 3, 2, 1", got, err, first.TaskID)
		}
		reqs, err := h.client.Records(ctx, RecordsRequest{Kind: RecordRequests, Scope: "team-a", IntentID: "intent-del"})
		if err != nil || len(reqs.Requests) != 2 || !reqs.Requests[1].TaskDeleted {
			t.Errorf("request records %+v, %v; want the resend marked deleted", reqs.Requests, err)
		}
	})
	t.Run("the other scope's task with the same intent id is untouched", func(t *testing.T) {
		got, err := h.client.Create(ctx, scoped("team-b", "intent-del", "file the report"))
		if err != nil || got.Outcome != OutcomeReplayed || got.TaskDeleted {
			t.Fatalf("team-b resend: %+v, %v", got, err)
		}
	})
	t.Run("the executor's contract reports the deleted mark", func(t *testing.T) {
		res, err := h.client.TaskService().Create(ctx, taskservice.Request{Scope: "team-a", IntentID: req.IntentID, RequestDigest: req.RequestDigest,
			RequestID: req.RequestID, Task: taskservice.Task{Title: req.Task.Title}, Request: req.Request, NotAfter: time.Now().Add(time.Hour)})
		if err != nil || res.Outcome != taskservice.Replayed || !res.TaskDeleted || res.TaskID != first.TaskID {
			t.Fatalf("%+v, %v", res, err)
		}
	})

	before := h.st.Stats()
	for _, tc := range []struct {
		name string
		req  DeleteRequest
		code string
		want error
	}{
		{"deleting it again by key is a conflict and changes nothing", DeleteRequest{Scope: "team-a", IntentID: "intent-del"}, CodeConflict, ErrTaskDeleted},
		{"deleting it again by task id is a conflict and changes nothing", DeleteRequest{TaskID: first.TaskID}, CodeConflict, ErrTaskDeleted},
		{"deleting an unknown key is not found and changes nothing", DeleteRequest{Scope: "team-c", IntentID: "intent-del"}, CodeNotFound, ErrUnknownTask},
		{"deleting a task id never made is not found and changes nothing", DeleteRequest{TaskID: "fake-task-0099"}, CodeNotFound, ErrUnknownTask},
		{"naming both a task id and a key is refused", DeleteRequest{TaskID: first.TaskID, IntentID: "intent-del"}, CodeBadRequest, ErrInvalidRequest},
		{"a task id of another form is refused", DeleteRequest{TaskID: "task-1"}, CodeBadRequest, ErrInvalidRequest},
		{"a bad scope is refused", DeleteRequest{Scope: "A", IntentID: "intent-del"}, CodeBadRequest, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Delete(ctx, tc.req)
			var se *ServiceError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Errorf("over NATS: %v; want code %s", err, tc.code)
			}
			if _, err := h.st.Delete(ctx, tc.req); !errors.Is(err, tc.want) {
				t.Errorf("in process: %v; want %v", err, tc.want)
			}
			if got := h.st.Stats(); got != before {
				t.Errorf("counts %+v after a refused delete; want %+v", got, before)
			}
		})
	}
	t.Run("a delete by task id deletes the other scope's task", func(t *testing.T) {
		resp, err := h.st.Delete(ctx, DeleteRequest{TaskID: "fake-task-0002"})
		if err != nil || resp.Deleted.Scope != "team-b" || resp.Counts.TasksExisting != 0 || resp.Deleted.Seq != 2 {
			t.Fatalf("%+v, %v", resp, err)
		}
	})
}

func TestDeletesAreOrderedWithCreates(t *testing.T) {
	st := openStore(t, t.TempDir(), Options{})
	ctx := ctxT(t)
	// Creates and deletes of many keys sent at once: every delete that
	// finds its task takes exactly one away, and a resend afterwards never
	// creates again.
	const n = 64
	errs := make(chan error, 2*n)
	for i := range n {
		id := PreloadIntent(i)
		go func() {
			_, err := st.Create(ctx, newRequest(id, "t"))
			errs <- err
		}()
		go func() {
			_, err := st.Delete(ctx, DeleteRequest{IntentID: id})
			if errors.Is(err, ErrUnknownTask) {
				err = nil // the delete came first
			}
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := st.KeyStats()
	c := st.Stats()
	if c.CreatesExecuted != n || c.TasksExisting != n-keys.TasksDeleted {
		t.Fatalf("counts %+v, keys %+v; want %d creates and tasks = creates - deletes", c, keys, n)
	}
	for i := range n {
		got, err := st.Create(ctx, newRequest(PreloadIntent(i), "t"))
		if err != nil || got.Outcome != OutcomeReplayed {
			t.Fatalf("resend %d: %+v, %v", i, got, err)
		}
	}
	if got := st.Stats(); got.CreatesExecuted != n {
		t.Errorf("creates %d after the resends; want %d", got.CreatesExecuted, n)
	}
}
