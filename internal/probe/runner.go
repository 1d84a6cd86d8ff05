package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
)

// cleanup deletes the tasks of the run's intent ids at its end, unless
// told to keep them, and counts what is left. It runs also when ctx ended
// early, on a context of its own, so that a stopped run leaves no more
// than it must.
func (r *runner) cleanup(ctx context.Context) Cleanup {
	c := Cleanup{Intents: []string{}, Failed: []string{}}
	if r.t.Count == nil {
		c.Note = "the run's tasks were left in place: the target cannot count them"
		return c
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(len(r.p.Intents)+1)*2*r.o.CallTimeout)
	defer cancel()
	for _, intent := range r.p.Intents {
		n, err := r.countErr(ctx, intent)
		if err != nil {
			c.Failed = append(c.Failed, fmt.Sprintf("%s: counting its tasks failed: %v", intent, err))
			continue
		}
		if n == 0 {
			continue
		}
		c.Intents = append(c.Intents, intent)
		if r.o.KeepTasks || r.t.Delete == nil {
			c.Left += n
			continue
		}
		// Only the run's own keys, in its own scope.
		if !r.p.own(intent) || !strings.HasPrefix(intent, Prefix) {
			c.Failed = append(c.Failed, fmt.Sprintf("%s: not this run's, left as it is", intent))
			continue
		}
		dctx, dcancel := context.WithTimeout(ctx, r.o.CallTimeout)
		err = r.t.Delete(dctx, Scope, intent)
		dcancel()
		left, cerr := r.countErr(ctx, intent)
		switch {
		case err != nil:
			c.Failed = append(c.Failed, fmt.Sprintf("%s: deleting its %s failed: %v", intent, plural(n, "task"), err))
			c.Left += n
		case cerr != nil:
			c.Failed = append(c.Failed, fmt.Sprintf("%s: counting its tasks after the deletion failed: %v", intent, cerr))
		default:
			c.Deleted += n - left
			c.Left += left
		}
	}
	switch {
	case r.o.KeepTasks:
		c.Kept = true
	case r.t.Delete == nil && c.Left > 0:
		c.Note = fmt.Sprintf("%s of this run left in place: the target cannot delete a task", plural(c.Left, "task"))
	}
	return c
}

// countErr counts the tasks of an intent id.
func (r *runner) countErr(ctx context.Context, intent string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	return r.t.Count(cctx, intent)
}

// rowHead returns a row with its question and default method.
func rowHead(id string) Row {
	switch id {
	case RowRetry:
		return Row{ID: id, Question: "second call, same key and body", Method: "sequential retry"}
	case RowConflict:
		return Row{ID: id, Question: "same key, different body", Method: "sequential: first body, other body, first body again"}
	case RowConcurrent:
		return Row{ID: id, Question: "N concurrent calls, one key", Method: "N goroutines at once"}
	case RowLostReply:
		return Row{ID: id, Question: "a lost reply, then a retry", Method: "the reply is lost after the service acted"}
	case RowAfterDelete:
		return Row{ID: id, Question: "key remembered after the task is deleted", Method: "delete, then retry"}
	case RowScope:
		return Row{ID: id, Question: "key scope", Method: "stated by the adapter; store ids of all answers compared"}
	case RowReadAfterWrite:
		return Row{ID: id, Question: "a create seen by the next lookup", Method: "a create, then at once a lookup of its key"}
	case RowNaive:
		return Row{ID: id, Question: "two plain creates, one key", Method: "without the adapter's protocol: no lookup, no lock"}
	}
	return Row{ID: id, Question: id}
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

type runner struct {
	t      Target
	p      Plan
	o      Options
	calls  atomic.Int64
	mu     sync.Mutex
	stores map[string]bool
	seq    atomic.Int64
	// notAfter is the expiry every call of the run carries, as an
	// approval's would: a service or ledger that keeps keys by it may
	// forget the run's keys an hour after the run (plus its allowances).
	notAfter time.Time
}

// ApprovalLifetime is how long after its start the probe's calls say
// their approval is valid (taskservice.Request.NotAfter).
const ApprovalLifetime = time.Hour

// request builds the create request of a row; variant 1 is another body
// under the same key. It carries a task-request.v1 document of its own, as
// the executor's calls carry the approved one, so that a service that
// checks the request against the call (the fake task service) answers the
// probe as it answers the executor; the digest is the document's.
func (r *runner) request(row string, variant int) taskservice.Request {
	intent := r.p.intent(row)
	title := fmt.Sprintf("%s%s: %s", TitlePrefix, r.p.RunID, strings.ReplaceAll(row, "_", " "))
	requestID := "task-request-" + intent
	if variant == 1 {
		title += " (changed)"
		requestID += "-changed"
	}
	sum := sha256.Sum256([]byte("sendtwice probe\x00" + intent))
	provider, destination := r.t.Provider, r.t.Destination
	if provider == "" {
		provider = document.ProviderFake
	}
	if destination == document.DefaultDestination {
		destination = ""
	}
	q := document.Request{SchemaVersion: document.RequestVersion, RequestID: requestID, IntentID: intent,
		Scope: Scope, Operation: document.OperationCreateTask, Provider: provider, Destination: destination,
		CandidateRef: document.CandidateRef{CandidateID: "cand-" + intent, CandidateDigest: "sha256:" + hex.EncodeToString(sum[:]), SourceVersion: "probe"},
		Task:         document.Task{Title: title}}
	doc, err := json.Marshal(q)
	var digest string
	if err == nil {
		digest, err = canon.DigestExact(doc)
	}
	if err != nil {
		// The ids and the title are made here, of printable text: JSON
		// and RFC 8785 represent them.
		panic(fmt.Sprintf("probe: making the request of row %s: %v", row, err))
	}
	return taskservice.Request{
		Scope:         Scope,
		IntentID:      intent,
		RequestDigest: digest,
		RequestID:     requestID,
		Task:          taskservice.Task{Title: title},
		Request:       doc,
		CandidateID:   "cand-" + intent,
		SourceVersion: "probe",
		ApprovedBy:    "executor probe",
		NotAfter:      r.notAfter,
		Provider:      provider,
		Destination:   q.DestinationName(),
	}
}

// call sends one create call to the target's service with its own
// deadline and call reference.
func (r *runner) call(ctx context.Context, req taskservice.Request, timeout time.Duration) (taskservice.Result, error) {
	return r.callOn(ctx, r.t.Service, req, timeout)
}

// callOn is call, to svc.
func (r *runner) callOn(ctx context.Context, svc taskservice.Service, req taskservice.Request, timeout time.Duration) (taskservice.Result, error) {
	if !r.p.own(req.IntentID) {
		return taskservice.Result{}, fmt.Errorf("probe: refusing to call for intent id %q, which is not this run's", req.IntentID)
	}
	req.CallRef = fmt.Sprintf("probe:%s:%d", r.p.RunID, r.seq.Add(1))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.calls.Add(1)
	res, err := svc.Create(ctx, req)
	if err != nil {
		return taskservice.Result{}, err
	}
	if err := taskservice.Check(res); err != nil {
		return taskservice.Result{}, taskservice.Permanent(fmt.Errorf("probe: the service broke the contract: %w", err))
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
func (r *runner) callRetry(ctx context.Context, req taskservice.Request) (taskservice.Result, int, error) {
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
func (r *runner) count(ctx context.Context, intent string) (int, string) {
	if r.t.Count == nil {
		return -1, ""
	}
	if !r.p.own(intent) {
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

// first makes the row's first call, which must create; ok false means the
// row is unknown (filled in).
func (r *runner) first(ctx context.Context, row *Row, req taskservice.Request) (taskservice.Result, bool) {
	res, _, err := r.callRetry(ctx, req)
	if err != nil {
		row.Status, row.Answer, row.Seen = Unknown, "not measured", "the first call "+failure(err)
		return res, false
	}
	if res.Outcome != taskservice.Created {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("the first call with a fresh key answered %s %s, not created", res.Outcome, res.TaskID)
		return res, false
	}
	return res, true
}
