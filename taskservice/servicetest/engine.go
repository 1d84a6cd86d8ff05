package servicetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// heads are the question and the default method of each row.
var heads = map[string]struct{ question, method string }{
	RowRetry:          {"second call, same key and body", "sequential retry"},
	RowConflict:       {"same key, different body", "sequential: first body, other body, first body again"},
	RowConcurrent:     {"N concurrent calls, one key", "N goroutines at once"},
	RowLostReply:      {"a lost reply, then a retry", "the reply is lost after the service acted"},
	RowAfterDelete:    {"key remembered after the task is deleted", "delete, then retry"},
	RowScope:          {"key scope", "stated by the adapter; store ids of all answers compared"},
	RowReadAfterWrite: {"a create seen by the next lookup", "a create, then at once a lookup of its key"},
	RowNaive:          {"two plain creates, one key", "without the adapter's protocol: no lookup, no lock"},
	RowOtherIntent:    {"other intent id, same content", "sequential: the content under a second intent id"},
	RowScopesApart:    {"one intent id in two scopes", "sequential: each scope, then a resend in each"},
	RowRestart:        {"key remembered across a restart", "create, restart, resend"},
}

// Head returns a row with its question and its default method, not yet
// measured.
func Head(id string) Row {
	h, ok := heads[id]
	if !ok {
		return Row{ID: id, Question: id}
	}
	return Row{ID: id, Question: h.question, Method: h.method}
}

// Fixes and consequences, one place for the wording.
const (
	fixLookUp        = "look the key up before creating and answer the first result (or an \"already exists\" that the adapter reads back as replayed)"
	fixKeepFirst     = "refuse another body under a known key (idempotency_conflict) and leave the first task and its key unchanged"
	fixAtomic        = "make the create atomic per key (create-if-absent, a unique constraint, If-None-Match: *), so that concurrent calls make one task"
	fixAnswer        = "answer a repeated key with the first result once the first call has finished, or with a transient error while it runs"
	fixRecordKey     = "record the key in the same step as the task, so that a retry after a lost reply finds it"
	fixTransient     = "classify timeouts and lost connections as transient, so that the delivery is retried instead of dead-lettered"
	fixTombstone     = "keep the key after its task is deleted (a tombstone) for at least the approvals' lifetime"
	fixOneScope      = "let every executor reach one scope (one store, one collection)"
	fixReadOwnWrites = "look keys up where a create is visible at once (the service's primary store, not a search index or a lagging replica)"
	consSecond       = "a resend of the same approval creates a second task"
	consMisreport    = "a resend of the same approval is not recognised as the same request"
)

// Rows measures the rows against one target, each on an intent id of its
// own ("probe-<run id>-<row>"). Measure runs one row; a row's calls are
// counted (Calls) and the store ids of their answers kept for the scope
// row, so that RowScope is measured after the rows that call.
type Rows struct {
	t      Target
	o      Options
	prefix string
	calls  atomic.Int64
	mu     sync.Mutex
	stores map[string]bool
	seq    atomic.Int64
}

// NewRows checks the target and the options and fills in their defaults.
func NewRows(t Target, o Options) (*Rows, error) {
	if t.Service == nil {
		return nil, errors.New("servicetest: the target has no service")
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 2 || o.Concurrency > MaxConcurrency {
		return nil, fmt.Errorf("servicetest: concurrency %d: want 2 to %d", o.Concurrency, MaxConcurrency)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.LostReplyWait <= 0 {
		o.LostReplyWait = DefaultLostReplyWait
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.RunID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("servicetest: picking a run id: %w", err)
		}
		o.RunID = hex.EncodeToString(b[:])
	}
	for _, r := range o.RunID {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return nil, fmt.Errorf("servicetest: run id %q: want lower-case letters and digits only", o.RunID)
		}
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(ApprovalLifetime).UTC().Truncate(time.Second)
	}
	return &Rows{t: t, o: o, prefix: Prefix + o.RunID + "-", stores: map[string]bool{}}, nil
}

// Options returns the options with their defaults filled in.
func (r *Rows) Options() Options { return r.o }

// Calls returns how many create calls the rows sent so far.
func (r *Rows) Calls() int64 { return r.calls.Load() }

// Intent is the intent id of a row: the run's prefix and the row's id.
func (r *Rows) Intent(row string) string {
	return r.prefix + strings.ReplaceAll(row, "_", "-")
}

// own reports whether id is the intent id of one of the rows.
func (r *Rows) own(id string) bool {
	if !strings.HasPrefix(id, Prefix) {
		return false
	}
	for _, row := range allRows {
		if r.Intent(row) == id || r.Intent(row)+otherIntentSuffix == id {
			return true
		}
	}
	return false
}

// measures are the measurement of each row.
var measures = map[string]func(*Rows, context.Context) Row{
	RowRetry:          (*Rows).retry,
	RowConflict:       (*Rows).conflict,
	RowConcurrent:     (*Rows).concurrent,
	RowLostReply:      (*Rows).lostReply,
	RowAfterDelete:    (*Rows).afterDelete,
	RowScope:          (*Rows).scope,
	RowReadAfterWrite: (*Rows).readAfterWrite,
	RowNaive:          (*Rows).naive,
	RowOtherIntent:    (*Rows).otherIntent,
	RowScopesApart:    (*Rows).scopesApart,
	RowRestart:        (*Rows).restart,
}

// Measure runs one row (RowRetry, RowConflict, ...) and returns what it saw.
func (r *Rows) Measure(ctx context.Context, id string) Row {
	measure, ok := measures[id]
	if !ok {
		return notMeasured(Head(id), "no such row")
	}
	return measure(r, ctx)
}

// ApprovalLifetime is how long after its start the rows' calls say
// their approval is valid (taskservice.Request.NotAfter), by default.
const ApprovalLifetime = time.Hour

// request builds the create request of a row; variant 1 is another body
// under the same key.
func (r *Rows) request(row string, variant int) taskservice.Request {
	intent := r.Intent(row)
	title := fmt.Sprintf("%s%s: %s", TitlePrefix, r.o.RunID, strings.ReplaceAll(row, "_", " "))
	requestID := "task-request-" + intent
	if variant == 1 {
		title += " (changed)"
		requestID += "-changed"
	}
	return r.complete(Scope, intent, requestID, title)
}

// complete makes a request of a key, a request id and a title, with the
// document and digest of the target's Document (or the suite's own).
func (r *Rows) complete(scope, intent, requestID, title string) taskservice.Request {
	req := taskservice.Request{
		Scope:         scope,
		IntentID:      intent,
		RequestID:     requestID,
		Task:          taskservice.Task{Title: title},
		CandidateID:   "cand-" + intent,
		SourceVersion: "probe",
		ApprovedBy:    "executor probe",
		NotAfter:      r.o.NotAfter,
	}
	if r.t.Document != nil {
		return r.t.Document(req)
	}
	return document(req)
}

// document gives req a JSON document of its key and content, and the
// digest of the document's bytes.
func document(req taskservice.Request) taskservice.Request {
	doc, err := json.Marshal(struct {
		Scope     string `json:"scope"`
		IntentID  string `json:"intent_id"`
		RequestID string `json:"request_id"`
		Title     string `json:"title"`
	}{req.Scope, req.IntentID, req.RequestID, req.Task.Title})
	if err != nil {
		// Four strings: JSON represents them.
		panic(fmt.Sprintf("servicetest: making the request of %s: %v", req.IntentID, err))
	}
	sum := sha256.Sum256(doc)
	req.Request = doc
	req.RequestDigest = "sha256:" + hex.EncodeToString(sum[:])
	return req
}

// call sends one create call to the target's service with its own
// deadline and call reference.
func (r *Rows) call(ctx context.Context, req taskservice.Request, timeout time.Duration) (taskservice.Result, error) {
	return r.callOn(ctx, r.t.Service, req, timeout)
}

// callOn is call, to svc.
func (r *Rows) callOn(ctx context.Context, svc taskservice.Service, req taskservice.Request, timeout time.Duration) (taskservice.Result, error) {
	if !r.own(req.IntentID) {
		return taskservice.Result{}, fmt.Errorf("servicetest: refusing to call for intent id %q, which is not this run's", req.IntentID)
	}
	req.CallRef = fmt.Sprintf("probe:%s:%d", r.o.RunID, r.seq.Add(1))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.calls.Add(1)
	res, err := svc.Create(ctx, req)
	if err != nil {
		return taskservice.Result{}, err
	}
	if err := taskservice.Check(res); err != nil {
		return taskservice.Result{}, taskservice.Permanent(fmt.Errorf("servicetest: the service broke the contract: %w", err))
	}
	if res.StoreID != "" {
		r.mu.Lock()
		r.stores[res.StoreID] = true
		r.mu.Unlock()
	}
	return res, nil
}

// callRetry is call, retried after transient failures as a redelivery
// would be. It returns how many retries it took.
func (r *Rows) callRetry(ctx context.Context, req taskservice.Request) (taskservice.Result, int, error) {
	res, err := r.call(ctx, req, r.o.CallTimeout)
	n := 0
	for err != nil && !taskservice.IsPermanent(err) && n < r.o.Retries && ctx.Err() == nil {
		n++
		select {
		case <-ctx.Done():
			return res, n, err
		case <-time.After(r.o.RetryDelay):
		}
		res, err = r.call(ctx, req, r.o.CallTimeout)
	}
	return res, n, err
}

// count returns the tasks of an intent as text for Seen ("; 1 task for the
// intent"), and the number (-1 when the target cannot count).
func (r *Rows) count(ctx context.Context, intent string) (int, string) {
	if r.t.Count == nil {
		return -1, ""
	}
	if !r.own(intent) {
		return -1, ""
	}
	cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	n, err := r.t.Count(cctx, intent)
	if err != nil {
		return -1, fmt.Sprintf("; the tasks could not be counted (%v)", err)
	}
	return n, "; " + plural(n, "task") + " for the intent"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func failure(err error) string {
	if taskservice.IsPermanent(err) {
		return "failed permanently: " + err.Error()
	}
	return "failed: " + err.Error()
}

// open makes the first call of row's own request, which must create; ok
// false means the row is unknown (filled in).
func (r *Rows) open(ctx context.Context, row *Row) (taskservice.Request, taskservice.Result, bool) {
	req := r.request(row.ID, 0)
	row.IntentID = req.IntentID
	res, ok := r.first(ctx, row, req)
	return req, res, ok
}

// notMeasured makes row unknown: seen says why it was not measured.
func notMeasured(row Row, seen string) Row {
	row.Status, row.Answer, row.Seen = Unknown, "not measured", seen
	return row
}

// notApplicable makes row not applicable: seen says why.
func notApplicable(row Row, seen string) Row {
	row.Status, row.Answer, row.Seen = NotApplicable, "not applicable", seen
	return row
}

// first makes the row's first call, which must create; ok false means the
// row is unknown (filled in).
func (r *Rows) first(ctx context.Context, row *Row, req taskservice.Request) (taskservice.Result, bool) {
	res, _, err := r.callRetry(ctx, req)
	if err != nil {
		*row = notMeasured(*row, "the first call "+failure(err))
		return res, false
	}
	if res.Outcome != taskservice.Created {
		*row = notMeasured(*row, fmt.Sprintf("the first call with a fresh key answered %s %s, not created", res.Outcome, res.TaskID))
		return res, false
	}
	return res, true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
