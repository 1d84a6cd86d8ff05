package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// This file is the wire contract of the fake task service: the NATS subjects
// and the JSON bodies of its micro endpoints. Callers (the executor through
// the taskservice contract, the audit, the command line) use these types and
// the Client over NATS; none of them calls the Store's Create or Records.

// ServiceName is the micro service name; endpoints live under it as subjects.
const ServiceName = "fake-task-provider"

// Endpoint subjects.
const (
	SubjectCreate  = ServiceName + ".create"
	SubjectStats   = ServiceName + ".stats"
	SubjectRecords = ServiceName + ".records"
	// SubjectDelete deletes a task the way its owner would in their list.
	SubjectDelete = ServiceName + ".delete"
	// SubjectFault exists only on a service started with faults allowed.
	SubjectFault = ServiceName + ".fault"
)

// Outcomes of a create call (see the package documentation, "What it does").
const (
	OutcomeCreated  = string(taskservice.Created)
	OutcomeReplayed = string(taskservice.Replayed)
	OutcomeConflict = string(taskservice.Conflict)
	// OutcomeRefused is the outcome of a request record whose call did not
	// match its request document (see RequestRecord.Refusal). Such a call
	// is answered with a "400" error reply, never with a CreateResponse.
	OutcomeRefused = "refused"
)

// Counts are the service's three counters. The same names are used wherever
// the counters are shown.
type Counts = taskservice.Counts

// Task is the content of a task as the caller asks for it. Unknown values stay
// null: nothing guesses a person or a date.
type Task struct {
	Title             string  `json:"title"`
	AssigneePersonRef *string `json:"assignee_person_ref"`
	DueAt             *string `json:"due_at"`
}

// CreateRequest asks for a task, keyed by the caller's intent id; the content
// is compared by RequestDigest ("sha256:" + 64 lower-case hex).
//
// Request is the task-request.v1 document the digest was computed over, as
// JSON (the executor sends the request the approval covers). The service
// recomputes the digest from it ("sha256:" over its RFC 8785 form) and
// refuses the call unless it is RequestDigest, the request's intent_id is
// IntentID, its request_id is RequestID (when given) and its task is Task;
// the task it creates is the request's. NewRequest and RequestFor build a
// create call with its request.
//
// Scope is the caller scope in which IntentID is a key: the service
// remembers the pair (Scope, IntentID). Absent means "default"
// (document.DefaultScope), so that callers that name none keep working;
// the request document's scope (or "default" when it names none) must be
// the same. NotAfter is the RFC 3339 time after which the approval that
// carries the call no longer passes the gate; absent means it never
// expires, and the key is then kept forever (see the package
// documentation, "Key lifetime").
type CreateRequest struct {
	Scope         string          `json:"scope,omitempty"`
	IntentID      string          `json:"intent_id"`
	RequestDigest string          `json:"request_digest"`
	RequestID     string          `json:"request_id,omitempty"`
	Task          Task            `json:"task"`
	Request       json.RawMessage `json:"request"`
	// CallRef names the caller's attempt: the executor sends four fields,
	// "APPROVALS:<stream_seq>:<delivery>:<attempt>" (topology.CallRef), the
	// stream, the message's sequence in it, its delivery count and the id
	// of this handling of the delivery. It is recorded with the request so
	// that an audit can match every request to a receipt or explain it.
	CallRef string `json:"call_ref,omitempty"`
	// NotAfter is the approval's expiry (RFC 3339); "" = never expires.
	NotAfter string `json:"not_after,omitempty"`
}

// FirstResult is what the service stored for a key (scope, intent id) on its
// first call, with what later happened to the key: how long it is kept and
// whether its task was deleted.
type FirstResult struct {
	Scope         string `json:"scope"`
	IntentID      string `json:"intent_id"`
	RequestDigest string `json:"request_digest"`
	RequestID     string `json:"request_id,omitempty"`
	TaskID        string `json:"task_id"`
	CreatedAt     string `json:"created_at"`
	// RequestSeq is the sequence of the request record that created it.
	RequestSeq uint64 `json:"request_seq"`
	// KeepUntil is when the key may be compacted (RFC 3339): the latest
	// not_after of every approval seen for it, plus the clock allowance
	// and the margin. "" = kept forever (an approval without expiry was
	// seen for it, or it predates key lifetimes).
	KeepUntil string `json:"keep_until,omitempty"`
	// TaskDeleted says that the key's task was deleted by its owner (at
	// DeletedAt); the key stays and answers replays with the deleted mark.
	TaskDeleted bool   `json:"task_deleted,omitempty"`
	DeletedAt   string `json:"deleted_at,omitempty"`
}

// CreateResponse answers a create call. TaskID is the first result's task id
// for created and replayed, and also for idempotency_conflict (the task that
// the intent id already names; nothing new is created).
//
// StoreID names the store that decided the call (see Info); a caller that
// sees two different store ids for one deployment has met two stores.
type CreateResponse struct {
	Outcome    string      `json:"outcome"`
	TaskID     string      `json:"task_id"`
	First      FirstResult `json:"first"`
	Counts     Counts      `json:"counts"`
	RequestSeq uint64      `json:"request_seq"`
	StoreID    string      `json:"store_id"`
	// TaskDeleted, on replayed (and idempotency_conflict), says that the
	// task the key is bound to was deleted by its owner: TaskID names it,
	// and nothing was created again.
	TaskDeleted bool `json:"task_deleted,omitempty"`
}

// Info is the reply of the stats endpoint: the three counters (as top-level
// members, so a reply decodes as Counts too), the id of the store that
// answered, and which service instance answered: its micro instance id, host
// name and process id.
//
//	{"requests_received": 2, "creates_executed": 1, "tasks_existing": 1,
//	 "store_id": "store-3f9c0a7e5b21d864", "instance": "<micro id>",
//	 "host": "build-1", "pid": 4242}
//
// Keys says how many keys are live and how many were compacted; Scopes
// gives the counters per scope, in scope order; Lifetime says how long the
// service keeps keys and records, so that an audit can tell a key or a
// record removed on time from one removed too early.
type Info struct {
	Counts
	StoreID  string        `json:"store_id"`
	Instance string        `json:"instance"`
	Host     string        `json:"host"`
	PID      int           `json:"pid"`
	Keys     KeyCounts     `json:"keys"`
	Scopes   []ScopeCounts `json:"scopes,omitempty"`
	Lifetime *Lifetime     `json:"lifetime,omitempty"`
}

// Lifetime is how long the service keeps keys and records, as Go
// durations ("5m0s"): a key is kept until the latest not_after seen for it
// plus KeyClockAllowance plus KeyMargin; request and create records for
// RecordsRetention ("0s" = forever). Absent from the stats reply of a
// service that predates it.
type Lifetime struct {
	KeyClockAllowance string `json:"key_clock_allowance"`
	KeyMargin         string `json:"key_margin"`
	RecordsRetention  string `json:"records_retention"`
}

// ErrBadLifetime marks a stats reply whose lifetime does not read as three
// durations.
var ErrBadLifetime = errors.New("provider: the stats reply's lifetime is not three durations")

// Durations reads the lifetime's three durations.
func (l Lifetime) Durations() (allowance, margin, retention time.Duration, err error) {
	var errs [3]error
	allowance, errs[0] = time.ParseDuration(l.KeyClockAllowance)
	margin, errs[1] = time.ParseDuration(l.KeyMargin)
	retention, errs[2] = time.ParseDuration(l.RecordsRetention)
	if err := errors.Join(errs[:]...); err != nil {
		return 0, 0, 0, fmt.Errorf("%w: reading %+v: %w", ErrBadLifetime, l, err)
	}
	return allowance, margin, retention, nil
}

// KeyCounts are the figures of the keys (scope, intent id): live (kept) and
// compacted (forgotten after their approvals expired), the tasks deleted
// by their owners, and the request and create records removed by the
// records retention.
type KeyCounts struct {
	Live           int64 `json:"keys_live"`
	Compacted      int64 `json:"keys_compacted"`
	TasksDeleted   int64 `json:"tasks_deleted"`
	RecordsRetired int64 `json:"records_retired"`
}

// ScopeCounts are one scope's counters: the three counters, its live and
// compacted keys and its deleted tasks. The totals (Info.Counts) are their
// sums.
type ScopeCounts struct {
	Scope string `json:"scope"`
	Counts
	KeysLive      int64 `json:"keys_live"`
	KeysCompacted int64 `json:"keys_compacted"`
	TasksDeleted  int64 `json:"tasks_deleted"`
}

// Record kinds for the records endpoint.
const (
	RecordRequests = "requests" // every request received
	RecordCreates  = "creates"  // every create executed
	RecordTasks    = "tasks"    // the tasks that exist
	RecordIntents  = "intents"  // per key, the first digest and result
	RecordDeletes  = "deletes"  // every task deleted by its owner
)

// RecordsRequest pages through one kind of audit record, by sequence
// (AfterSeq, Limit), for one scope, or for one key (scope, intent id; an
// intent id without a scope is in "default").
type RecordsRequest struct {
	Kind     string `json:"kind"`
	Scope    string `json:"scope,omitempty"`
	IntentID string `json:"intent_id,omitempty"`
	AfterSeq uint64 `json:"after_seq,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// RequestRecord is one request received, whatever its outcome: created,
// replayed, idempotency_conflict, or refused (the call did not match its
// request document; Refusal says why, TaskID is empty and nothing was
// created). Its IntentID, RequestDigest and RequestID are the call's.
type RequestRecord struct {
	Seq           uint64 `json:"seq"`
	Scope         string `json:"scope"`
	IntentID      string `json:"intent_id"`
	RequestDigest string `json:"request_digest"`
	RequestID     string `json:"request_id,omitempty"`
	Outcome       string `json:"outcome"`
	TaskID        string `json:"task_id"`
	ReceivedAt    string `json:"received_at"`
	CallRef       string `json:"call_ref,omitempty"`
	NotAfter      string `json:"not_after,omitempty"`
	// TaskDeleted is true when the call was answered with the deleted mark.
	TaskDeleted bool `json:"task_deleted,omitempty"`
	// ReplyDropped is true when the fault switch withheld this request's reply.
	ReplyDropped bool `json:"reply_dropped,omitempty"`
	// Refusal says why a refused request was refused; nil otherwise.
	Refusal *Refusal `json:"refusal,omitempty"`
}

// Refusal says why the service refused a well-formed create call: the check
// that failed (CheckRequestDigest or CheckRequestBinding), the member of
// the call or of its request at fault ("request_digest", "intent_id",
// "task.title", "request.provider", ...) and why.
type Refusal struct {
	Check  string `json:"check"`
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// CreateRecord is one create executed.
type CreateRecord struct {
	Seq           uint64 `json:"seq"`
	Scope         string `json:"scope"`
	IntentID      string `json:"intent_id"`
	RequestDigest string `json:"request_digest"`
	TaskID        string `json:"task_id"`
	RequestSeq    uint64 `json:"request_seq"`
	CreatedAt     string `json:"created_at"`
}

// TaskRecord is one task that exists.
type TaskRecord struct {
	Seq       uint64 `json:"seq"`
	TaskID    string `json:"task_id"`
	Scope     string `json:"scope"`
	IntentID  string `json:"intent_id"`
	Task      Task   `json:"task"`
	CreatedAt string `json:"created_at"`
}

// RecordsResponse carries one page; exactly one slice is filled, by Kind.
// NextSeq is the AfterSeq for the next page, 0 when there is none.
type RecordsResponse struct {
	Kind     string          `json:"kind"`
	Requests []RequestRecord `json:"requests,omitempty"`
	Creates  []CreateRecord  `json:"creates,omitempty"`
	Tasks    []TaskRecord    `json:"tasks,omitempty"`
	Intents  []FirstResult   `json:"intents,omitempty"`
	Deletes  []DeleteRecord  `json:"deletes,omitempty"`
	NextSeq  uint64          `json:"next_seq"`
}

// DeleteRecord is one task deleted by its owner. The task record is gone;
// the key stays, marked deleted.
type DeleteRecord struct {
	Seq       uint64 `json:"seq"`
	Scope     string `json:"scope"`
	IntentID  string `json:"intent_id"`
	TaskID    string `json:"task_id"`
	DeletedAt string `json:"deleted_at"`
}

// DeleteRequest deletes one task, the way its owner deletes it in their
// list: named by its key (Scope, IntentID; no scope is "default") or by
// TaskID, not both.
type DeleteRequest struct {
	Scope    string `json:"scope,omitempty"`
	IntentID string `json:"intent_id,omitempty"`
	TaskID   string `json:"task_id,omitempty"`
}

// DeleteResponse answers a delete: the record kept and the counters after it.
type DeleteResponse struct {
	Deleted DeleteRecord `json:"deleted"`
	Counts  Counts       `json:"counts"`
}

// FaultRequest arms the fault switch: the replies of the next DropReplies
// creates are withheld after their effect is committed.
type FaultRequest struct {
	DropReplies int `json:"drop_replies"`
}

// FaultResponse says how many replies are still to be dropped.
type FaultResponse struct {
	DropRepliesPending int `json:"drop_replies_pending"`
}
