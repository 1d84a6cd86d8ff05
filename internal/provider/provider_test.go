package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

func TestOutcomesOverNATS(t *testing.T) {
	t.Run("one intent id sent three times", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{})
		first := newRequest("intent-a", "add the missing check items")
		steps := []struct {
			name    string
			req     CreateRequest
			outcome string
			counts  Counts
		}{
			{"a new intent id creates one task", first, OutcomeCreated, counts(1, 1, 1)},
			{"the same intent id and content is replayed with the first task id", first, OutcomeReplayed, counts(2, 1, 1)},
			{"the same intent id with changed content is a conflict that creates nothing",
				newRequest("intent-a", "add the missing check items, and more"), OutcomeConflict, counts(3, 1, 1)},
		}
		var firstTask string
		for i, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				resp, err := h.client.Create(ctxT(t), step.req)
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if resp.Outcome != step.outcome {
					t.Errorf("outcome %q, want %q", resp.Outcome, step.outcome)
				}
				if resp.Counts != step.counts {
					t.Errorf("counts in reply %+v, want %+v", resp.Counts, step.counts)
				}
				if got, err := h.client.Stats(ctxT(t)); err != nil || got != step.counts {
					t.Errorf("stats %+v (%v), want %+v", got, err, step.counts)
				}
				if resp.RequestSeq != uint64(i+1) {
					t.Errorf("request seq %d, want %d", resp.RequestSeq, i+1)
				}
				if i == 0 {
					firstTask = resp.TaskID
					if firstTask != "fake-task-0001" {
						t.Errorf("first task id %q, want fake-task-0001", firstTask)
					}
				}
				if resp.TaskID != firstTask || resp.First.TaskID != firstTask {
					t.Errorf("task id %q (first %q), want %q", resp.TaskID, resp.First.TaskID, firstTask)
				}
				if resp.First.RequestDigest != first.RequestDigest || resp.First.RequestSeq != 1 {
					t.Errorf("first result %+v, want the first call's digest and seq 1", resp.First)
				}
			})
		}
		t.Run("the intent record still holds the first digest and result", func(t *testing.T) {
			recs, err := h.client.Records(ctxT(t), RecordsRequest{Kind: RecordIntents, IntentID: "intent-a"})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs.Intents) != 1 {
				t.Fatalf("intent records %+v, want one", recs.Intents)
			}
			fr := recs.Intents[0]
			if fr.RequestDigest != first.RequestDigest || fr.TaskID != firstTask || fr.RequestSeq != 1 || fr.RequestID != first.RequestID {
				t.Errorf("intent record %+v changed", fr)
			}
			reqs, err := h.client.Records(ctxT(t), RecordsRequest{Kind: RecordRequests, IntentID: "intent-a"})
			if err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for _, r := range reqs.Requests {
				outcomes = append(outcomes, r.Outcome)
			}
			if got := strings.Join(outcomes, ","); got != "created,replayed,idempotency_conflict" {
				t.Errorf("request records say %s", got)
			}
			audit(t, h.st, true)
		})
	})

	t.Run("two intent ids with the same content create two tasks", func(t *testing.T) {
		h := newHarness(t, Options{}, ServiceConfig{})
		a, err := h.client.Create(ctxT(t), newRequest("intent-1", "same content"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.client.Create(ctxT(t), newRequest("intent-2", "same content"))
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != OutcomeCreated || b.Outcome != OutcomeCreated {
			t.Errorf("outcomes %q, %q; want created twice", a.Outcome, b.Outcome)
		}
		if a.TaskID == b.TaskID || b.TaskID != "fake-task-0002" {
			t.Errorf("task ids %q, %q; want two different, the second fake-task-0002", a.TaskID, b.TaskID)
		}
		if got, want := b.Counts, counts(2, 2, 2); got != want {
			t.Errorf("counts %+v, want %+v", got, want)
		}
		audit(t, h.st, true)
	})
}

func TestRestartKeepsCountersAndTaskIDs(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	reopen := func(st *Store) *Store {
		t.Helper()
		if st != nil {
			if err := st.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
		}
		st, err := Open(dir, Options{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return st
	}
	st := reopen(nil)
	defer func() { st.Close() }()
	steps := []struct {
		name    string
		req     CreateRequest
		outcome string
		task    string
		counts  Counts
	}{
		{"the first intent creates fake-task-0001", newRequest("a", "A"), OutcomeCreated, "fake-task-0001", counts(1, 1, 1)},
		{"after a restart the same intent is replayed", newRequest("a", "A"), OutcomeReplayed, "fake-task-0001", counts(2, 1, 1)},
		{"after a restart a new intent gets fake-task-0002", newRequest("b", "B"), OutcomeCreated, "fake-task-0002", counts(3, 2, 2)},
		{"after another restart the next task id is fake-task-0003", newRequest("c", "C"), OutcomeCreated, "fake-task-0003", counts(4, 3, 3)},
	}
	for i, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if i > 0 {
				before := st.Stats()
				st = reopen(st)
				if got := st.Stats(); got != before {
					t.Fatalf("counters after reopen %+v, before %+v", got, before)
				}
			}
			resp, err := st.Create(ctx, step.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Outcome != step.outcome || resp.TaskID != step.task || resp.Counts != step.counts {
				t.Errorf("got %s %s %+v, want %s %s %+v", resp.Outcome, resp.TaskID, resp.Counts, step.outcome, step.task, step.counts)
			}
		})
	}
	audit(t, st, true)
}

func TestFormatTaskID(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{1, "fake-task-0001"},
		{42, "fake-task-0042"},
		{9999, "fake-task-9999"},
		{10000, "fake-task-10000"},
		{1234567, "fake-task-1234567"},
	} {
		t.Run(fmt.Sprintf("task number %d is %s", tc.n, tc.want), func(t *testing.T) {
			if got := FormatTaskID(tc.n); got != tc.want {
				t.Errorf("FormatTaskID(%d) = %q", tc.n, got)
			}
		})
	}
}

// TestTwoProcessesOneAfterTheOther runs the test binary itself as separate
// provider processes on one data directory (see runRole).
func TestTwoProcessesOneAfterTheOther(t *testing.T) {
	url := startNATS(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runProcess := func(t *testing.T, role string, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(),
			roleEnv+"="+role,
			"PROVIDER_TEST_NATS="+url,
			"PROVIDER_TEST_DATA="+dir,
			"PROVIDER_TEST_INTENT=intent-seed",
			"PROVIDER_TEST_CONTENT=補上通知設定的檢查項目",
			// A race-enabled binary otherwise sleeps a second on exit.
			"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
		)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("process %s: %v\n%s", role, err, stderr.String())
		}
		if err := json.Unmarshal(stdout, out); err != nil {
			t.Fatalf("process %s printed %q: %v", role, stdout, err)
		}
	}
	var first, second CreateResponse
	t.Run("the first process creates the task", func(t *testing.T) {
		runProcess(t, "create", &first)
		if first.Outcome != OutcomeCreated || first.TaskID != "fake-task-0001" {
			t.Errorf("first process: %s %s", first.Outcome, first.TaskID)
		}
	})
	t.Run("the second process replays the same task id", func(t *testing.T) {
		runProcess(t, "create", &second)
		if second.Outcome != OutcomeReplayed || second.TaskID != first.TaskID {
			t.Errorf("second process: %s %s, want replayed %s", second.Outcome, second.TaskID, first.TaskID)
		}
	})
	t.Run("a third process reads 2, 1, 1", func(t *testing.T) {
		var got Counts
		runProcess(t, "stats", &got)
		if want := counts(2, 1, 1); got != want {
			t.Errorf("counts %+v, want %+v", got, want)
		}
	})
}

func TestConcurrentCallersWithOneIntentGetOneCreate(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	const callers, conns = 64, 8
	clients := make([]*Client, conns)
	for i := range clients {
		clients[i] = NewClient(connect(t, h.url))
	}
	req := newRequest("intent-race", "one task, many senders")
	ctx := ctxT(t)
	start := make(chan struct{})
	resps := make([]CreateResponse, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = clients[i%conns].Create(ctx, req)
		})
	}
	close(start)
	wg.Wait()
	outcomes := map[string]int{}
	tasks := map[string]int{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		outcomes[resps[i].Outcome]++
		tasks[resps[i].TaskID]++
	}
	if outcomes[OutcomeCreated] != 1 || outcomes[OutcomeReplayed] != callers-1 {
		t.Errorf("outcomes %v, want 1 created and %d replayed", outcomes, callers-1)
	}
	if len(tasks) != 1 {
		t.Errorf("task ids %v, want one", tasks)
	}
	if got, want := h.st.Stats(), counts(callers, 1, 1); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	audit(t, h.st, true)
}

func TestConcurrentCallersWithManyIntentsInProcess(t *testing.T) {
	st := openStore(t, t.TempDir(), Options{})
	const callers, calls, intents = 16, 25, 10
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for k := range calls {
				id := fmt.Sprintf("intent-%d", (g+k)%intents)
				if _, err := st.Create(ctx, newRequest(id, "content of "+id)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep := audit(t, st, true)
	if want := counts(callers*calls, intents, intents); rep.counts != want {
		t.Errorf("counts %+v, want %+v", rep.counts, want)
	}
}

func TestMalformedCallsAreRefusedAndNotCounted(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	if _, err := h.client.Create(ctxT(t), newRequest("intent-ok", "fine")); err != nil {
		t.Fatal(err)
	}
	valid := `"request_digest":"` + digestOf("x") + `","task":{"title":"x"}`
	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"a body that is not JSON", `{not json`, "body"},
		{"an empty body", ``, "body"},
		{"trailing data after the object", `{"intent_id":"i",` + valid + `} {}`, "body"},
		{"an unknown member", `{"intent_id":"i",` + valid + `,"priority":1}`, "priority"},
		{"an unknown member inside the task", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"x","owner":"me"}}`, "owner"},
		{"a missing intent id", `{` + valid + `}`, "intent_id"},
		{"an intent id longer than 256 bytes", `{"intent_id":"` + strings.Repeat("i", 257) + `",` + valid + `}`, "intent_id"},
		{"an intent id with a control character", `{"intent_id":"a\u0007b",` + valid + `}`, "intent_id"},
		{"an intent id that is a number", `{"intent_id":7,` + valid + `}`, "intent_id"},
		{"a digest in upper case", `{"intent_id":"i","request_digest":"` + strings.ToUpper(digestOf("x")) + `","task":{"title":"x"}}`, "request_digest"},
		{"a digest of another algorithm", `{"intent_id":"i","request_digest":"md5:0123","task":{"title":"x"}}`, "request_digest"},
		{"a missing digest", `{"intent_id":"i","task":{"title":"x"}}`, "request_digest"},
		{"an empty title", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"  "}}`, "task.title"},
		{"a missing task", `{"intent_id":"i","request_digest":"` + digestOf("x") + `"}`, "task.title"},
		{"an oversized title", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"` + strings.Repeat("t", MaxTitleBytes+1) + `"}}`, "task.title"},
		{"an empty assignee instead of null", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"x","assignee_person_ref":""}}`, "task.assignee_person_ref"},
		{"a case variant of the intent id's name", `{"Intent_ID":"i",` + valid + `}`, "Intent_ID"},
		{"a case variant of the title's name", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"Title":"x"}}`, "task.Title"},
		{"a duplicate intent id", `{"intent_id":"a","intent_id":"b",` + valid + `}`, "intent_id: duplicate"},
		{"a duplicate title inside the task", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"x","title":"y"}}`, "task.title: duplicate"},
		{"a null intent id", `{"intent_id":null,` + valid + `}`, "intent_id"},
		{"a lone surrogate in the title", `{"intent_id":"i","request_digest":"` + digestOf("x") + `","task":{"title":"\ud800"}}`, "body"},
		{"an array instead of an object", `[]`, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" gets a 400 naming "+tc.field, func(t *testing.T) {
			msg, err := h.nc.RequestWithContext(ctxT(t), SubjectCreate, []byte(tc.body))
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
			if code != "400" || !strings.Contains(desc, tc.field) {
				t.Errorf("reply code %q description %q; want 400 naming %q", code, desc, tc.field)
			}
			if got, want := h.st.Stats(), counts(1, 1, 1); got != want {
				t.Errorf("counts %+v, want %+v unchanged", got, want)
			}
		})
	}
	t.Run("the client reports a 400 as a ServiceError that is not transient", func(t *testing.T) {
		_, err := h.client.Create(ctxT(t), CreateRequest{RequestDigest: "sha256:nope", Task: Task{Title: "x"}})
		se, ok := errors.AsType[*ServiceError](err)
		if !ok || se.Code != "400" || !strings.Contains(se.Description, "intent_id") {
			t.Fatalf("error %v, want a 400 ServiceError naming intent_id", err)
		}
		if IsTransient(err) {
			t.Error("a 400 must not be transient")
		}
	})
	t.Run("nothing was recorded for the refused calls", func(t *testing.T) {
		rep := audit(t, h.st, true)
		if len(rep.requestsPer) != 1 || rep.counts != counts(1, 1, 1) {
			t.Errorf("records %+v, counts %+v", rep.requestsPer, rep.counts)
		}
	})
}

func TestValidateCreate(t *testing.T) {
	ok := newRequest("intent-1", "title")
	null := func(s string) *string { return &s }
	cases := []struct {
		name  string
		edit  func(*CreateRequest)
		field string // "" = valid
	}{
		{"a complete request is valid", func(*CreateRequest) {}, ""},
		{"an intent id of exactly 256 bytes is valid", func(r *CreateRequest) { r.IntentID = strings.Repeat("x", 256) }, ""},
		{"a non-ASCII title is valid", func(r *CreateRequest) { r.Task.Title = "補上通知設定的檢查項目" }, ""},
		{"an assignee and due date are valid", func(r *CreateRequest) { r.Task.AssigneePersonRef, r.Task.DueAt = null("p-1"), null("2030-01-01") }, ""},
		{"an empty intent id is refused", func(r *CreateRequest) { r.IntentID = "" }, "intent_id"},
		{"an intent id of 257 bytes is refused", func(r *CreateRequest) { r.IntentID = strings.Repeat("x", 257) }, "intent_id"},
		{"an intent id with a newline is refused", func(r *CreateRequest) { r.IntentID = "a\nb" }, "intent_id"},
		{"an intent id with DEL is refused", func(r *CreateRequest) { r.IntentID = "a\x7fb" }, "intent_id"},
		{"an intent id with invalid UTF-8 is refused", func(r *CreateRequest) { r.IntentID = "a\xffb" }, "intent_id"},
		{"a digest of 63 hex digits is refused", func(r *CreateRequest) { r.RequestDigest = r.RequestDigest[:len(r.RequestDigest)-1] }, "request_digest"},
		{"a digest with a non-hex digit is refused", func(r *CreateRequest) { r.RequestDigest = r.RequestDigest[:len(r.RequestDigest)-1] + "g" }, "request_digest"},
		{"a request id with a tab is refused", func(r *CreateRequest) { r.RequestID = "a\tb" }, "request_id"},
		{"a title with a control character is refused", func(r *CreateRequest) { r.Task.Title = "a\x00" }, "task.title"},
		{"an empty due date is refused", func(r *CreateRequest) { r.Task.DueAt = null("") }, "task.due_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.edit(&req)
			err := validateCreate(&req)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			fe, isField := errors.AsType[*FieldError](err)
			if !errors.Is(err, ErrInvalidRequest) || !isField || fe.Field != tc.field {
				t.Errorf("error %v, want an invalid request naming %q", err, tc.field)
			}
		})
	}
	t.Run("the store refuses an invalid request without counting it", func(t *testing.T) {
		st := openStore(t, t.TempDir(), Options{})
		_, err := st.Create(ctxT(t), CreateRequest{IntentID: "x"})
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("error %v, want ErrInvalidRequest", err)
		}
		if got := st.Stats(); got != (Counts{}) {
			t.Errorf("counts %+v, want zero", got)
		}
	})
}

func TestFaultSwitchDropsAReplyAfterCommit(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{AllowFaults: true})
	ctx := ctxT(t)
	req := newRequest("intent-lost-reply", "the reply to this one is lost")

	armed, err := h.client.ArmFault(ctx, 1)
	if err != nil || armed.DropRepliesPending != 1 {
		t.Fatalf("arm fault: %+v, %v", armed, err)
	}
	impatient := &Client{nc: h.nc, Timeout: 300 * time.Millisecond}
	t.Run("the caller times out with a transient error", func(t *testing.T) {
		_, err := impatient.Create(ctx, req)
		if err == nil || !IsTransient(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want a transient timeout", err)
		}
	})
	var taskID string
	t.Run("the request record says the reply was dropped", func(t *testing.T) {
		recs, err := h.client.Records(ctx, RecordsRequest{Kind: RecordRequests})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs.Requests) != 1 || !recs.Requests[0].ReplyDropped || recs.Requests[0].Outcome != OutcomeCreated {
			t.Fatalf("request records %+v, want one created with reply_dropped", recs.Requests)
		}
		taskID = recs.Requests[0].TaskID
	})
	t.Run("a retry is replayed with the same task id", func(t *testing.T) {
		resp, err := impatient.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Outcome != OutcomeReplayed || resp.TaskID != taskID {
			t.Errorf("retry: %s %s, want replayed %s", resp.Outcome, resp.TaskID, taskID)
		}
		if want := counts(2, 1, 1); resp.Counts != want {
			t.Errorf("counts %+v, want %+v", resp.Counts, want)
		}
	})
	t.Run("the switch is used up", func(t *testing.T) {
		if n := h.svc.pendingDrops(); n != 0 {
			t.Errorf("pending drops %d", n)
		}
		recs := allRecords(t, h.st, RecordRequests, "")
		if len(recs.Requests) != 2 || recs.Requests[1].ReplyDropped {
			t.Errorf("request records %+v, want the retry delivered", recs.Requests)
		}
	})
	t.Run("a service without faults allowed has no fault endpoint", func(t *testing.T) {
		plain := newHarness(t, Options{}, ServiceConfig{})
		if _, err := plain.client.ArmFault(ctx, 1); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("arm fault: %v, want no responders", err)
		}
	})
}

func TestUnsafeCreateEveryCallCreatesTwice(t *testing.T) {
	h := newHarness(t, Options{UnsafeCreateEveryCall: true}, ServiceConfig{})
	req := newRequest("intent-unsafe", "created twice on purpose")
	var ids []string
	for range 2 {
		resp, err := h.client.Create(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Outcome != OutcomeCreated {
			t.Errorf("outcome %q, want created", resp.Outcome)
		}
		ids = append(ids, resp.TaskID)
	}
	if ids[0] == ids[1] {
		t.Errorf("task ids %v, want two", ids)
	}
	rep := audit(t, h.st, false)
	if rep.counts != counts(2, 2, 2) || rep.createsPer[req.IntentID] != 2 {
		t.Errorf("counts %+v, creates for the intent %d; want 2,2,2 and 2", rep.counts, rep.createsPer[req.IntentID])
	}
}

func TestRecordsPaging(t *testing.T) {
	st := openStore(t, t.TempDir(), Options{})
	ctx := ctxT(t)
	for _, id := range []string{"a", "b", "c", "d", "e", "a"} {
		if _, err := st.Create(ctx, newRequest(id, id)); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		seqs []uint64
		next uint64
	}
	seqsOf := func(r RecordsResponse) []uint64 {
		var out []uint64
		for _, x := range r.Requests {
			out = append(out, x.Seq)
		}
		for _, x := range r.Intents {
			out = append(out, x.RequestSeq)
		}
		for _, x := range r.Tasks {
			out = append(out, x.Seq)
		}
		return out
	}
	cases := []struct {
		name string
		req  RecordsRequest
		want page
	}{
		{"the first page of requests names the next", RecordsRequest{Kind: RecordRequests, Limit: 2}, page{[]uint64{1, 2}, 2}},
		{"a middle page of requests", RecordsRequest{Kind: RecordRequests, AfterSeq: 2, Limit: 2}, page{[]uint64{3, 4}, 4}},
		{"the last full page of requests ends the listing", RecordsRequest{Kind: RecordRequests, AfterSeq: 4, Limit: 2}, page{[]uint64{5, 6}, 0}},
		{"the requests of one intent", RecordsRequest{Kind: RecordRequests, IntentID: "a"}, page{[]uint64{1, 6}, 0}},
		{"the requests of one intent after its first", RecordsRequest{Kind: RecordRequests, IntentID: "a", AfterSeq: 1}, page{[]uint64{6}, 0}},
		{"intents in the order first seen", RecordsRequest{Kind: RecordIntents, AfterSeq: 1, Limit: 3}, page{[]uint64{2, 3, 4}, 4}},
		{"the tasks of one intent", RecordsRequest{Kind: RecordTasks, IntentID: "e"}, page{[]uint64{5}, 0}},
		{"an unknown intent has no records", RecordsRequest{Kind: RecordTasks, IntentID: "zz"}, page{nil, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := st.Records(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := page{seqsOf(resp), resp.NextSeq}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("an unknown kind is an invalid request", func(t *testing.T) {
		if _, err := st.Records(RecordsRequest{Kind: "everything"}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("error %v", err)
		}
	})
}

func TestClosedStoreAnswersWithTransient500(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	if err := h.st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.Create(ctxT(t), newRequest("late", "late"))
	se, ok := errors.AsType[*ServiceError](err)
	if !ok || se.Code != "500" || !IsTransient(err) {
		t.Fatalf("error %v, want a transient 500", err)
	}
	if _, err := h.st.Create(ctxT(t), newRequest("late", "late")); !errors.Is(err, ErrClosed) {
		t.Errorf("in-process create after close: %v, want ErrClosed", err)
	}
}

func TestStoppingTheServiceAnswersEveryCallItTook(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{})
	const callers = 64
	ctx := ctxT(t)
	client := &Client{nc: h.nc, Timeout: 3 * time.Second}
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			_, errs[i] = client.Create(ctx, newRequest(fmt.Sprintf("stop-%d", i), "x"))
		})
	}
	close(start)
	time.Sleep(2 * time.Millisecond)
	if err := h.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	answered := 0
	for i, err := range errs {
		switch {
		case err == nil:
			answered++
		case errors.Is(err, nats.ErrNoResponders):
		default:
			t.Errorf("caller %d: %v; want a reply or no responders, never a timeout", i, err)
		}
	}
	t.Logf("%d of %d calls answered before the service stopped", answered, callers)
	if got := h.st.Stats().RequestsReceived; got != int64(answered) {
		t.Errorf("requests received %d, answered %d", got, answered)
	}
}

func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a NATS timeout is transient", nats.ErrTimeout, true},
		{"no responders is transient", fmt.Errorf("create: %w", nats.ErrNoResponders), true},
		{"a context deadline is transient", fmt.Errorf("create: %w", context.DeadlineExceeded), true},
		{"a 500 is transient", &ServiceError{Code: "500", Description: "store"}, true},
		{"a 503 is transient", fmt.Errorf("x: %w", &ServiceError{Code: "503"}), true},
		{"a 400 is not transient", &ServiceError{Code: "400", Description: "intent_id"}, false},
		{"a cancelled context is not transient", context.Canceled, false},
		{"no error is not transient", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTransient(tc.err); got != tc.want {
				t.Errorf("IsTransient(%v) = %v", tc.err, got)
			}
		})
	}
}
