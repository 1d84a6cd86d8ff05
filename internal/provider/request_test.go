package provider

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/sendtwice/sendtwice/internal/canon"
)

// approved is the create call of a request with every task field set, as
// an executor sends it for an approved request.
func approved(t testing.TB, intent string) CreateRequest {
	t.Helper()
	req, err := NewRequest(intent, Task{Title: "Add the missing check items", AssigneePersonRef: strp("person-ana"), DueAt: strp("2030-01-31T17:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	req.CallRef = "APPROVALS:1:1:a"
	return req
}

// editDocument changes the request document of req and returns req with
// the changed document and its digest; the call's other members stay.
func editDocument(t testing.TB, req CreateRequest, edit func(m map[string]any)) CreateRequest {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(req.Request, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if req.RequestDigest, err = canon.Digest(doc); err != nil {
		t.Fatal(err)
	}
	req.Request = doc
	return req
}

// body is the JSON body of a create call; its request member is raw, as
// written (unchecked), when raw is not nil, and left out when there is none.
func body(t testing.TB, req CreateRequest, raw *string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"intent_id": req.IntentID, "request_digest": req.RequestDigest, "request_id": req.RequestID,
		"task": req.Task, "call_ref": req.CallRef})
	if err != nil {
		t.Fatal(err)
	}
	request := string(req.Request)
	if raw != nil {
		request = *raw
	}
	if request == "" {
		return b
	}
	return append(b[:len(b)-1], `,"request":`+request+`}`...)
}

// A call of TestACreateIsCheckedAgainstItsRequest is the approved call
// with its request document edited (edited), with one of its fields
// changed (changed), or with raw text for its request member (raw).
func edited(edit func(m map[string]any)) func(*testing.T, CreateRequest) (CreateRequest, *string) {
	return func(t *testing.T, real CreateRequest) (CreateRequest, *string) {
		return editDocument(t, real, edit), nil
	}
}

func changed(change func(c *CreateRequest)) func(*testing.T, CreateRequest) (CreateRequest, *string) {
	return func(_ *testing.T, real CreateRequest) (CreateRequest, *string) {
		change(&real)
		return real, nil
	}
}

func raw(request func(real CreateRequest) string) func(*testing.T, CreateRequest) (CreateRequest, *string) {
	return func(_ *testing.T, real CreateRequest) (CreateRequest, *string) { return real, strp(request(real)) }
}

// TestACreateIsCheckedAgainstItsRequest sends, over NATS to a served store,
// a create call for an approved request changed in one way, and expects
// each to be refused with its check and field, recorded as a refused
// request received (or, when the body itself is not strict JSON, refused
// unrecorded), with nothing created; then the approved call itself is
// created with the request's content.
func TestACreateIsCheckedAgainstItsRequest(t *testing.T) {
	cases := []struct {
		name  string
		call  func(t *testing.T, real CreateRequest) (CreateRequest, *string)
		check string // "" = a malformed body, not recorded
		field string
	}{
		{"a digest of another request's bytes", func(t *testing.T, real CreateRequest) (CreateRequest, *string) {
			other := editDocument(t, real, func(m map[string]any) { m["task"].(map[string]any)["title"] = "EVIL: wire 1M" })
			real.RequestDigest = other.RequestDigest
			return real, nil
		}, CheckRequestDigest, "request_digest"},
		{"a request document edited under the approved digest", func(t *testing.T, real CreateRequest) (CreateRequest, *string) {
			forged := editDocument(t, real, func(m map[string]any) { m["task"].(map[string]any)["title"] = "EVIL: wire 1M" })
			forged.RequestDigest = real.RequestDigest
			return forged, nil
		}, CheckRequestDigest, "request_digest"},
		{"a title changed in the call", changed(func(c *CreateRequest) { c.Task.Title = "EVIL: wire 1M" }), CheckRequestBinding, "task.title"},
		{"an assignee changed in the call", changed(func(c *CreateRequest) { c.Task.AssigneePersonRef = strp("person-mallory") }), CheckRequestBinding, "task.assignee_person_ref"},
		{"an assignee left out of the call", changed(func(c *CreateRequest) { c.Task.AssigneePersonRef = nil }), CheckRequestBinding, "task.assignee_person_ref"},
		{"a due date changed in the call", changed(func(c *CreateRequest) { c.Task.DueAt = strp("2031-01-01T00:00:00Z") }), CheckRequestBinding, "task.due_at"},
		{"an intent id other than the request's", changed(func(c *CreateRequest) { c.IntentID = "intent-other" }), CheckRequestBinding, "intent_id"},
		{"a request id other than the request's", changed(func(c *CreateRequest) { c.RequestID = "task-request-other" }), CheckRequestBinding, "request_id"},
		{"a request for another operation", edited(func(m map[string]any) { m["operation"] = "delete_task" }), CheckRequestBinding, "request.operation"},
		{"a request addressed to another provider", edited(func(m map[string]any) { m["provider"] = "other-provider.v1" }), CheckRequestBinding, "request.provider"},
		{"no request at all", changed(func(c *CreateRequest) { c.Request = nil }), CheckRequestFormat, "request"},
		{"a null request", raw(func(CreateRequest) string { return `null` }), CheckRequestFormat, "request"},
		{"a request that is a string holding JSON, not a JSON object", func(_ *testing.T, real CreateRequest) (CreateRequest, *string) {
			s, _ := json.Marshal(string(real.Request))
			return real, strp(string(s))
		}, CheckRequestFormat, "request"},
		{"a request of another schema version", edited(func(m map[string]any) { m["schema_version"] = "task-request.v2" }), CheckRequestFormat, "request.schema_version"},
		{"a request with an unknown member", edited(func(m map[string]any) { m["priority"] = "high" }), CheckRequestFormat, "request.priority"},
		{"a request without its candidate reference", edited(func(m map[string]any) { delete(m, "candidate_ref") }), CheckRequestFormat, "request.candidate_ref"},
		{"a request whose title is a number", edited(func(m map[string]any) { m["task"].(map[string]any)["title"] = 7 }), CheckRequestFormat, "request.task.title"},
		{"a request whose task has a case variant of a member name", func(t *testing.T, real CreateRequest) (CreateRequest, *string) {
			return editDocument(t, real, func(m map[string]any) {
				tm := m["task"].(map[string]any)
				tm["Title"] = tm["title"]
				delete(tm, "title")
			}), nil
		}, CheckRequestFormat, "request.task.Title"},
		{"a request that is not JSON", raw(func(CreateRequest) string { return `{not json` }), "", "body"},
		{"a request with a duplicate member", raw(func(real CreateRequest) string {
			return strings.Replace(string(real.Request), `"title":`, `"title":"EVIL: wire 1M","title":`, 1)
		}), "", "request.task.title: duplicate"},
		{"a request with a lone surrogate", raw(func(real CreateRequest) string {
			return strings.Replace(string(real.Request), `"title":"`, `"title":"\ud800`, 1)
		}), "", "body"},
	}
	for _, tc := range cases {
		recorded := "recorded as a refused request"
		if tc.check == "" {
			recorded = "a malformed call, not recorded"
		}
		t.Run(tc.name+" is refused at "+tc.field+", "+recorded+", and creates nothing", func(t *testing.T) {
			h := newHarness(t, Options{}, ServiceConfig{})
			real := approved(t, "intent-0001")
			call, rawRequest := tc.call(t, real)
			msg, err := h.nc.RequestWithContext(ctxT(t), SubjectCreate, body(t, call, rawRequest))
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
			if code != CodeBadRequest || !strings.Contains(desc, tc.field) || !strings.Contains(desc, tc.check) {
				t.Fatalf("reply code %q description %q; want %s naming %q and %q", code, desc, CodeBadRequest, tc.check, tc.field)
			}
			reqs := allRecords(t, h.st, RecordRequests, "").Requests
			if tc.check == "" {
				if len(reqs) != 0 || h.st.Stats() != counts(0, 0, 0) {
					t.Fatalf("a malformed call was recorded: %+v, counts %+v", reqs, h.st.Stats())
				}
			} else {
				if !strings.HasPrefix(desc, "refused: ") || !strings.Contains(desc, "recorded as request 1") {
					t.Errorf("description %q does not say that the call was refused and recorded as request 1", desc)
				}
				if h.st.Stats() != counts(1, 0, 0) {
					t.Errorf("counts %+v, want one request received and nothing created", h.st.Stats())
				}
				if len(reqs) != 1 || reqs[0].Outcome != OutcomeRefused || reqs[0].Refusal == nil ||
					reqs[0].Refusal.Check != tc.check || reqs[0].Refusal.Field != tc.field || reqs[0].Refusal.Reason == "" ||
					reqs[0].IntentID != call.IntentID || reqs[0].CallRef != call.CallRef || reqs[0].TaskID != "" {
					t.Fatalf("request records %+v, want one refused at %s/%s for the call", reqs, tc.check, tc.field)
				}
			}

			// The approved call itself is then created, with its request's
			// content.
			resp, err := h.client.Create(ctxT(t), real)
			if err != nil || resp.Outcome != OutcomeCreated {
				t.Fatalf("the approved call: %+v, %v; want created", resp, err)
			}
			tasks := allRecords(t, h.st, RecordTasks, "").Tasks
			if len(tasks) != 1 || tasks[0].IntentID != real.IntentID || tasks[0].Task.Title != real.Task.Title ||
				!sameRef(tasks[0].Task.AssigneePersonRef, real.Task.AssigneePersonRef) || !sameRef(tasks[0].Task.DueAt, real.Task.DueAt) {
				t.Errorf("tasks %+v, want the approved request's task only", tasks)
			}
			audit(t, h.st, true)
		})
	}
}

func TestARefusedCallIsRecordedAcrossARestartAndLeavesTheIntentFree(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	real := approved(t, "intent-0001")
	forged := real
	forged.Task.Title = "EVIL: wire 1M"
	_, err = st.Create(ctxT(t), forged)
	re, ok := errors.AsType[*RefusedError](err)
	if !ok || !errors.Is(err, ErrRefused) || re.Check != CheckRequestBinding || re.Field != "task.title" || re.RequestSeq != 1 {
		t.Fatalf("error %v, want a RefusedError at request_binding/task.title recorded as request 1", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir, Options{})
	if got := st.Stats(); got != counts(1, 0, 0) {
		t.Fatalf("counts after restart %+v, want 1, 0, 0", got)
	}
	// The intent id is still free: the refusal bound nothing to it.
	resp, err := st.Create(ctxT(t), real)
	if err != nil || resp.Outcome != OutcomeCreated || resp.First.RequestSeq != 2 {
		t.Fatalf("the approved call: %+v, %v; want created as request 2", resp, err)
	}
	for _, forged := range []CreateRequest{forged, editDocument(t, real, func(m map[string]any) { m["task"].(map[string]any)["title"] = "EVIL" })} {
		forged.RequestDigest = real.RequestDigest
		if _, err := st.Create(ctxT(t), forged); !errors.Is(err, ErrRefused) {
			t.Errorf("a forged call after the create: %v, want refused (not replayed)", err)
		}
	}
	if got := st.Stats(); got != counts(4, 1, 1) {
		t.Errorf("counts %+v, want 4 requests, 1 create, 1 task", got)
	}
	audit(t, st, true)
}

func TestACallMadeByFunctionIsCheckedLikeOneOverNATS(t *testing.T) {
	st := openStore(t, t.TempDir(), Options{})
	real := approved(t, "intent-0001")
	cases := []struct {
		name    string
		request []byte
		field   string
	}{
		{"a request that is not JSON", []byte(`{not json`), "request"},
		{"a request with trailing data", append(append([]byte(nil), real.Request...), " {}"...), "request"},
		{"an empty request", nil, "request"},
		{"a request with a duplicate member", []byte(strings.Replace(string(real.Request), `"title":`, `"title":"x","title":`, 1)), "request"},
	}
	for i, tc := range cases {
		t.Run(tc.name+" is refused at request_format and recorded", func(t *testing.T) {
			call := real
			call.Request = tc.request
			_, err := st.Create(ctxT(t), call)
			re, ok := errors.AsType[*RefusedError](err)
			if !ok || re.Check != CheckRequestFormat || re.Field != tc.field || re.RequestSeq != uint64(i+1) {
				t.Fatalf("error %v, want refused at %s/%s as request %d", err, CheckRequestFormat, tc.field, i+1)
			}
		})
	}
	t.Run("an invalid call is refused before its request is read, unrecorded", func(t *testing.T) {
		call := real
		call.IntentID = ""
		call.Request = []byte(`{not json`)
		if _, err := st.Create(ctxT(t), call); !errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrRefused) {
			t.Fatalf("error %v, want an invalid request", err)
		}
		if got := st.Stats(); got != counts(int64(len(cases)), 0, 0) {
			t.Errorf("counts %+v, want %d refused requests and nothing else", got, len(cases))
		}
	})
}

func TestARefusedCallLeavesTheFaultSwitchArmed(t *testing.T) {
	h := newHarness(t, Options{}, ServiceConfig{AllowFaults: true})
	if _, err := h.client.ArmFault(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	real := approved(t, "intent-0001")
	forged := real
	forged.Task.Title = "EVIL: wire 1M"
	_, err := h.client.Create(ctxT(t), forged)
	if se, ok := errors.AsType[*ServiceError](err); !ok || se.Code != CodeBadRequest || IsTransient(err) {
		t.Fatalf("forged call: %v, want a 400 that is not transient", err)
	}
	if got := h.svc.pendingDrops(); got != 1 {
		t.Errorf("drops pending %d after a refusal, want 1", got)
	}
}

func TestNewRequestAndRequestForAgreeWithTheDigestOfTheDocument(t *testing.T) {
	req := approved(t, "intent-0001")
	want, err := canon.DigestExact(req.Request)
	if err != nil {
		t.Fatal(err)
	}
	if req.RequestDigest != want {
		t.Errorf("digest %s, canon says %s", req.RequestDigest, want)
	}
	again, err := RequestFor(req.Request)
	if err != nil || again.RequestDigest != want || again.IntentID != "intent-0001" || again.RequestID != "task-request-intent-0001" ||
		again.Task.Title != req.Task.Title || *again.Task.AssigneePersonRef != "person-ana" || *again.Task.DueAt != "2030-01-31T17:00:00Z" {
		t.Errorf("RequestFor: %+v, %v", again, err)
	}
	if _, err := RequestFor([]byte(`{"schema_version":"task-request.v1"}`)); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("RequestFor of an incomplete document: %v, want ErrInvalidRequest", err)
	}
}

// FuzzCreateCall checks the create call's parser: it never panics, and a
// call it accepts without a refusal carries a request document that hashes
// to the call's digest and holds the call's intent id and task.
func FuzzCreateCall(f *testing.F) {
	real := approved(f, "intent-0001")
	f.Add(body(f, real, nil))
	forged := real
	forged.Task.Title = "EVIL"
	f.Add(body(f, forged, nil))
	f.Add(body(f, real, strp(`null`)))
	f.Add(body(f, real, strp(`{"schema_version":"task-request.v1"}`)))
	f.Add([]byte(`{"intent_id":"i","request_digest":"sha256:` + strings.Repeat("0", 64) + `","task":{"title":"x"},"request":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, refusal, err := decodeCreate(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		if err := validateCreate(&req); err != nil {
			t.Fatalf("accepted a call that is not valid: %v", err)
		}
		if refusal != nil {
			switch refusal.Check {
			case CheckRequestFormat, CheckRequestDigest, CheckRequestBinding:
			default:
				t.Fatalf("refusal with unknown check %q", refusal.Check)
			}
			if refusal.Field == "" || refusal.Reason == "" {
				t.Fatalf("refusal without field or reason: %+v", refusal)
			}
			return
		}
		m, err := parseBody(data)
		if err != nil {
			t.Fatalf("accepted a body the parser refuses: %v", err)
		}
		digest, err := canon.DigestTree(m["request"])
		if err != nil || digest != req.RequestDigest {
			t.Fatalf("accepted a request that digests to %s (%v), not %s", digest, err, req.RequestDigest)
		}
		d, err := readRequest(m["request"])
		if err != nil || d.IntentID != req.IntentID || d.RequestID != req.RequestID || d.Task.Title != req.Task.Title ||
			!sameRef(d.Task.AssigneePersonRef, req.Task.AssigneePersonRef) || !sameRef(d.Task.DueAt, req.Task.DueAt) ||
			d.Operation != RequestOperation || d.Provider != RequestProvider {
			t.Fatalf("accepted %+v for the request %+v (%v)", req, d, err)
		}
	})
}

func strp(s string) *string { return &s }
