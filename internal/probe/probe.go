package probe

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Prefix starts every intent id the probe makes: "probe-<run id>-<row>".
const Prefix = "probe-"

// Scope is the caller scope of every call the probe makes, and TitlePrefix
// starts every title: its tasks are told apart from a pipeline's (verify
// lists them apart, a person sees them in a task list for what they are).
const (
	Scope       = "sendtwice-probe"
	TitlePrefix = "[sendtwice probe] "
)

// Defaults of Options.
const (
	DefaultConcurrency   = 16
	DefaultCallTimeout   = 10 * time.Second
	DefaultLostReplyWait = 2 * time.Second
	DefaultRetries       = 3
	DefaultRetryDelay    = 200 * time.Millisecond
	// MaxConcurrency bounds Options.Concurrency: the probe is a short
	// experiment, not a load test.
	MaxConcurrency = 256
)

// Target is a task service to probe, as an adapter presents it.
type Target struct {
	// Name names the service in the report ("fake task service").
	Name string
	// Service is the service, reached through the public contract only.
	Service taskservice.Service
	// Scope says in what scope the service remembers keys ("the service",
	// "the collection"), as the adapter states it; empty when it cannot
	// say.
	Scope string
	// Delete deletes the task of one key (scope, intent id), as a user
	// would in the service's own interface; nil when the target cannot.
	// The probe calls it only with its Scope and intent ids it made.
	Delete func(ctx context.Context, scope, intentID string) error
	// NeverDeletes states that the service has no way to delete a task, so
	// that a key lasts as long as the service's store. It answers the
	// "key remembered after the task is deleted" row when Delete is nil.
	NeverDeletes bool
	// LoseReply arranges that the reply to the next create call is lost
	// after the service has acted on it (the fake service's fault switch, a
	// proxy that drops the response); disarm undoes it if the call did not
	// use it up. Nil when the target cannot lose a reply.
	LoseReply func(ctx context.Context) (disarm func(context.Context) error, err error)
	// LoseReplyHow says how the reply is lost, for the table ("the service
	// withholds the reply after commit"); empty for a generic description.
	LoseReplyHow string
	// Count returns how many tasks exist for an intent id, counted by the
	// service; nil when the target cannot list its tasks.
	Count func(ctx context.Context, intentID string) (int, error)
	// Class states how the service keeps a resend to one task, as the
	// adapter states it: "keeps keys" (the service replays a key it holds),
	// "atomic create-if-absent" (the server refuses a second create of a
	// name), "no key: the adapter looks up and locks"; empty when it
	// cannot say.
	Class string
	// Naive creates a task on every call, with no lookup and no lock: what
	// a plain retry does to the service without the adapter's protocol. The
	// naive-retry row sends it two calls with one key and counts the tasks
	// (then deletes them again, when Delete is set). Nil when the target
	// offers no such create; NaiveWhyNot then says why, for the row.
	Naive       taskservice.Service
	NaiveWhyNot string
	// Find looks the key of a request up, creating nothing
	// (taskservice.Finder's Find), for an adapter that decides a create by
	// a lookup: the read-after-write row checks that a lookup right after
	// a create sees it. Nil when no lookup decides a create; FindWhyNot
	// then says why, for the row.
	Find       func(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error)
	FindWhyNot string
	// Provider and Destination are what the probe's requests name, so that
	// a service that routes calls by them (an executor's router over
	// several destinations) sends them to the target; empty means the fake
	// task service's default destination.
	Provider, Destination string
}

// Options tune a run; the zero value takes every default.
type Options struct {
	// Concurrency is the number of calls sent at once with one key
	// (DefaultConcurrency; 2 to MaxConcurrency).
	Concurrency int
	// RunID makes the intent ids unique; empty picks a random one. It is
	// lower-case letters and digits only.
	RunID string
	// CallTimeout bounds each call (DefaultCallTimeout).
	CallTimeout time.Duration
	// LostReplyWait is how long the call whose reply is lost waits for it
	// (DefaultLostReplyWait).
	LostReplyWait time.Duration
	// Retries is how many times a call that failed transiently is retried,
	// as the executor would redeliver it (DefaultRetries; -1 for none).
	Retries int
	// RetryDelay is the pause before each retry (DefaultRetryDelay).
	RetryDelay time.Duration
	// KeepTasks leaves the run's tasks in place at its end; by default
	// the run deletes them (Target.Delete), so that the service's list is
	// as it was.
	KeepTasks bool
}

// Row ids, in the order of the report.
const (
	RowRetry       = "retry"
	RowConflict    = "conflict"
	RowConcurrent  = "concurrent"
	RowLostReply   = "lost_reply"
	RowAfterDelete = "after_delete"
	RowScope       = "scope"
	// RowReadAfterWrite: a create, then at once a lookup of its key.
	RowReadAfterWrite = "read_after_write"
	// RowNaive: two plain creates with one key, without the adapter's
	// protocol, for comparison; never part of the verdict.
	RowNaive = "naive_retry"
)

// Status is a row's judgement.
type Status string

// Statuses of a row.
const (
	// Safe: what was seen keeps at-least-once delivery from doing anything twice.
	Safe Status = "safe"
	// Caveat: safe for at-least-once delivery, with a limit the user should
	// know (a deleted task comes back on a late resend).
	Caveat Status = "caveat"
	// Unsafe: what was seen makes a resend do something twice or wrong.
	Unsafe Status = "unsafe"
	// Unknown: the row could not be measured for this target.
	Unknown Status = "unknown"
	// Info: measured for comparison, not judged (what a plain retry does
	// without the adapter's protocol); never part of the verdict.
	Info Status = "info"
	// NotApplicable: the question does not arise for this target (its
	// Seen says why); never part of the verdict.
	NotApplicable Status = "n/a"
)

// Row is one question and its answer.
type Row struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	// Method says how the row was measured.
	Method string `json:"how_measured"`
	// Answer is the short answer for the table ("first result").
	Answer string `json:"answer"`
	// Seen is what the calls returned, with task ids.
	Seen   string `json:"seen"`
	Status Status `json:"status"`
	// Consequence says, for an unsafe or caveat row, what it means for a
	// resend; Fix what would cure it.
	Consequence string `json:"consequence,omitempty"`
	Fix         string `json:"fix,omitempty"`
	// IntentID is the intent id the row used, if any.
	IntentID string `json:"intent_id,omitempty"`
}

// Verdict sums the rows up.
type Verdict struct {
	// Safe is true when no row is unsafe or unknown.
	Safe bool `json:"safe"`
	// Headline is "safe for at-least-once delivery", "unsafe for
	// at-least-once delivery" or "not proven safe for at-least-once
	// delivery".
	Headline string `json:"headline"`
	// Summary is one sentence: "safe for at-least-once delivery", or what
	// makes it unsafe or unproven.
	Summary string `json:"summary"`
	// Unsafe and Unknown list the ids of such rows.
	Unsafe  []string `json:"unsafe_rows"`
	Unknown []string `json:"unknown_rows"`
	// Caveats are the consequences of caveat rows; Fixes the fixes of
	// unsafe and caveat rows.
	Caveats []string `json:"caveats"`
	Fixes   []string `json:"fixes"`
}

// Report is the result of a run.
type Report struct {
	Target string `json:"target"`
	Scope  string `json:"scope"`
	// Class is the service's class, as the adapter states it.
	Class       string  `json:"class"`
	RunID       string  `json:"run_id"`
	Prefix      string  `json:"intent_prefix"`
	Concurrency int     `json:"concurrency"`
	Calls       int64   `json:"create_calls"`
	Rows        []Row   `json:"rows"`
	Verdict     Verdict `json:"verdict"`
	// Cleanup says what became of the run's tasks at its end.
	Cleanup Cleanup `json:"cleanup"`
}

// Cleanup is what the run did with its tasks at its end: deleted them
// (Target.Delete), or kept them (Options.KeepTasks, or a target that
// cannot delete or count them).
type Cleanup struct {
	// Kept says the tasks were left on purpose (Options.KeepTasks).
	Kept bool `json:"kept"`
	// Deleted and Left count the run's tasks deleted and still there
	// afterwards, by the service's count; Intents are the intent ids that
	// had tasks at the end.
	Deleted int      `json:"deleted"`
	Left    int      `json:"left"`
	Intents []string `json:"intent_ids"`
	// Failed says, per intent id, why its tasks could not be deleted or
	// counted; Note why nothing was tried.
	Failed []string `json:"failed"`
	Note   string   `json:"note,omitempty"`
}

// String says what the cleanup did, in one sentence.
func (c Cleanup) String() string {
	var b strings.Builder
	switch {
	case c.Note != "":
		b.WriteString(c.Note)
	case c.Kept:
		fmt.Fprintf(&b, "kept %s of this run (--keep-tasks)", plural(c.Left, "task"))
	default:
		fmt.Fprintf(&b, "deleted %s of this run; %s left", plural(c.Deleted, "task"), plural(c.Left, "task"))
	}
	if len(c.Intents) > 0 {
		fmt.Fprintf(&b, " (intent ids %s, scope %s)", strings.Join(c.Intents, ", "), Scope)
	}
	for _, f := range c.Failed {
		b.WriteString("; " + f)
	}
	return b.String()
}

// Plan says what a run will send and create, before it starts.
type Plan struct {
	Target string `json:"target"`
	RunID  string `json:"run_id"`
	// Prefix starts every intent id of the run ("probe-<run id>-").
	Prefix  string   `json:"intent_prefix"`
	Intents []string `json:"intent_ids"`
	// Calls is the number of create calls, not counting retries after a
	// transient failure; MaxCalls counts them.
	Calls    int `json:"create_calls"`
	MaxCalls int `json:"max_create_calls"`
	// Tasks is how many tasks a service that keeps its keys ends up
	// holding (one per intent id); MaxTasks how many one that forgets every
	// key could create.
	Tasks    int `json:"tasks"`
	MaxTasks int `json:"max_tasks"`
	// Deletes is how many of the run's own tasks it deletes.
	Deletes int `json:"deletes"`

	opts Options
}

// String says the plan in a few sentences, for a person to consent to.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The probe sends %d create calls to the %s (at most %d if calls fail and are retried),\n", p.Calls, p.Target, p.MaxCalls)
	fmt.Fprintf(&b, "with %d new intent ids starting %q, and creates %s there\n", len(p.Intents), p.Prefix, plural(p.Tasks, "task"))
	b.WriteString("(up to one per call if the service does not keep its keys).")
	if p.Deletes > 0 {
		fmt.Fprintf(&b, " It deletes %s of its own again.", plural(p.Deletes, "task"))
	}
	b.WriteString("\nIt never touches any other intent id. Its tasks are in scope " + Scope + ", titled \"" + TitlePrefix + "…\";")
	if p.opts.KeepTasks {
		b.WriteString(" it leaves them in place (--keep-tasks).")
	} else {
		b.WriteString(" it deletes them at the end (--keep-tasks keeps them).")
	}
	return b.String()
}

// NewPlan checks the target and the options and fixes the run id.
func NewPlan(t Target, o Options) (Plan, error) {
	if t.Service == nil {
		return Plan{}, errors.New("probe: the target has no service")
	}
	if t.Name == "" {
		t.Name = "task service"
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 2 || o.Concurrency > MaxConcurrency {
		return Plan{}, fmt.Errorf("probe: concurrency %d: want 2 to %d", o.Concurrency, MaxConcurrency)
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
			return Plan{}, fmt.Errorf("probe: picking a run id: %w", err)
		}
		o.RunID = hex.EncodeToString(b[:])
	}
	for _, r := range o.RunID {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return Plan{}, fmt.Errorf("probe: run id %q: want lower-case letters and digits only", o.RunID)
		}
	}
	p := Plan{Target: t.Name, RunID: o.RunID, Prefix: Prefix + o.RunID + "-", opts: o}
	// calls per row, in row order; the concurrent row's retries are one per call
	add := func(row string, calls, tasks int) {
		p.Intents = append(p.Intents, p.intent(row))
		p.Calls += calls
		p.MaxCalls += calls * (1 + o.Retries)
		p.Tasks += tasks
		p.MaxTasks += calls * (1 + o.Retries) // one per call, retries included
	}
	add(RowRetry, 2, 1)
	add(RowConflict, 3, 1)
	add(RowConcurrent, o.Concurrency, 1)
	if t.LoseReply != nil {
		add(RowLostReply, 2, 1)
	}
	if t.Delete != nil {
		add(RowAfterDelete, 2, 1)
		p.Deletes = 1
	}
	if t.Find != nil {
		add(RowReadAfterWrite, 1, 1)
	}
	if t.Naive != nil {
		// Two plain creates, never retried: each may make a task.
		p.Intents = append(p.Intents, p.intent(RowNaive))
		p.Calls += 2
		p.MaxCalls += 2
		p.Tasks += 2
		p.MaxTasks += 2
		if t.Delete != nil {
			p.Deletes += 2
		}
	}
	return p, nil
}

// intent is the intent id of a row.
func (p Plan) intent(row string) string {
	return p.Prefix + strings.ReplaceAll(row, "_", "-")
}

// own reports whether id is one of this run's intent ids.
func (p Plan) own(id string) bool {
	for _, i := range p.Intents {
		if i == id {
			return true
		}
	}
	return false
}

// Run runs the plan's script against t and returns the report. t must be
// the target the plan was made for. Each row is measured on its own intent
// id; a row whose calls fail in a way that says nothing about keys is
// Unknown. Run returns an error only when ctx ends before the script does;
// the report then holds the rows measured so far and the rest as unknown.
func Run(ctx context.Context, t Target, p Plan) (*Report, error) {
	if t.Service == nil || p.Prefix == "" {
		return nil, errors.New("probe: run needs a target and a plan from NewPlan")
	}
	r := &runner{t: t, p: p, o: p.opts, stores: map[string]bool{}, notAfter: time.Now().Add(ApprovalLifetime).UTC().Truncate(time.Second)}
	rep := &Report{Target: p.Target, Scope: t.Scope, Class: t.Class, RunID: p.RunID, Prefix: p.Prefix, Concurrency: r.o.Concurrency}
	steps := []struct {
		id string
		fn func(context.Context) Row
	}{
		{RowRetry, r.retry},
		{RowConflict, r.conflict},
		{RowConcurrent, r.concurrent},
		{RowLostReply, r.lostReply},
		{RowAfterDelete, r.afterDelete},
		{RowScope, r.scope},
		{RowReadAfterWrite, r.readAfterWrite},
		{RowNaive, r.naive},
	}
	var err error
	for _, s := range steps {
		var row Row
		if err == nil {
			row = s.fn(ctx)
			if ctx.Err() != nil {
				err = fmt.Errorf("probe: stopped during %q: %w", s.id, context.Cause(ctx))
				row.Status, row.Answer = Unknown, "not measured"
				row.Seen = "stopped before the row was finished: " + context.Cause(ctx).Error()
				row.Consequence, row.Fix = "", ""
			}
		} else {
			row = rowHead(s.id)
			row.Status, row.Answer, row.Seen = Unknown, "not measured", "not run: the probe was stopped"
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Calls = r.calls.Load()
	rep.Verdict = Judge(rep.Rows)
	rep.Cleanup = r.cleanup(ctx)
	return rep, err
}

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

func (r *runner) retry(ctx context.Context) Row {
	row := rowHead(RowRetry)
	req := r.request(RowRetry, 0)
	row.IntentID = req.IntentID
	r1, ok := r.first(ctx, &row, req)
	if !ok {
		return row
	}
	r2, n, err := r.callRetry(ctx, req)
	after := ""
	if n > 0 {
		after = fmt.Sprintf(" after %s", plural(n, "retry"))
	}
	tasks, counted := r.count(ctx, req.IntentID)
	switch {
	case err != nil:
		row.Status, row.Answer = Unsafe, "error"
		row.Seen = fmt.Sprintf("created %s, then the retry %s%s", r1.TaskID, failure(err), counted)
		row.Consequence, row.Fix = "a resend of a carried-out approval fails and is dead-lettered", fixAnswer
		if taskservice.IsPermanent(err) {
			row.Fix = fixLookUp
		}
	case r2.Outcome == taskservice.Created || tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("created %s, then %s %s%s%s", r1.TaskID, r2.Outcome, r2.TaskID, after, counted)
		row.Consequence, row.Fix = consSecond, fixLookUp
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Seen = fmt.Sprintf("created %s, then idempotency_conflict %s for the same body%s%s", r1.TaskID, r2.TaskID, after, counted)
		row.Consequence, row.Fix = consMisreport, fixLookUp
	case r2.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "another task"
		row.Seen = fmt.Sprintf("created %s, then replayed naming %s%s%s", r1.TaskID, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a resend's receipt names another task than the first", fixLookUp
	default:
		row.Status, row.Answer = Safe, "first result"
		row.Seen = fmt.Sprintf("created %s, then replayed %s%s%s", r1.TaskID, r2.TaskID, after, counted)
	}
	return row
}

func (r *runner) conflict(ctx context.Context) Row {
	row := rowHead(RowConflict)
	req, other := r.request(RowConflict, 0), r.request(RowConflict, 1)
	row.IntentID = req.IntentID
	r1, ok := r.first(ctx, &row, req)
	if !ok {
		return row
	}
	r2, _, err := r.callRetry(ctx, other)
	if err != nil {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("created %s, then the other body %s", r1.TaskID, failure(err))
		return row
	}
	r3, _, err3 := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	third := ""
	if err3 != nil {
		third = "; the first body again " + failure(err3)
	} else {
		third = fmt.Sprintf("; the first body again: %s %s", r3.Outcome, r3.TaskID)
	}
	row.Seen = fmt.Sprintf("created %s; the other body: %s %s%s%s", r1.TaskID, r2.Outcome, r2.TaskID, third, counted)
	switch {
	case r2.Outcome == taskservice.Created || tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Consequence, row.Fix = "a changed request under a known intent creates a second task", fixKeepFirst
	case r2.Outcome == taskservice.Replayed:
		row.Status, row.Answer = Unsafe, "replayed"
		row.Consequence, row.Fix = "a changed request under a known intent is reported as done, and the change is lost unseen", fixKeepFirst
	case r2.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "conflict, another task"
		row.Consequence, row.Fix = "a conflict names another task than the one the intent holds", fixKeepFirst
	case err3 != nil:
		row.Status, row.Answer = Unknown, "conflict"
	case r3.Outcome != taskservice.Replayed || r3.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "conflict, first replaced"
		row.Consequence, row.Fix = "a changed request replaces the first under its key, so a resend of the first is no longer recognised", fixKeepFirst
	default:
		row.Status, row.Answer = Safe, "conflict, first kept"
	}
	return row
}

func (r *runner) concurrent(ctx context.Context) Row {
	row := rowHead(RowConcurrent)
	row.Method = fmt.Sprintf("%d goroutines at once", r.o.Concurrency)
	req := r.request(RowConcurrent, 0)
	row.IntentID = req.IntentID
	n := r.o.Concurrency
	type answer struct {
		res     taskservice.Result
		err     error
		retried bool
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			res, err := r.call(ctx, req, r.o.CallTimeout)
			answers[i] = answer{res: res, err: err}
		})
	}
	close(start)
	wg.Wait()
	// A call that failed transiently is retried, as its delivery would be.
	for i := range answers {
		if a := &answers[i]; a.err != nil && !taskservice.IsPermanent(a.err) && ctx.Err() == nil {
			a.res, _, a.err = r.callRetry(ctx, req)
			a.retried = true
		}
	}
	var created, replayed, conflict, failed, retried int
	ids := map[string]bool{}
	var lastErr error
	for _, a := range answers {
		if a.retried {
			retried++
		}
		if a.err != nil {
			failed++
			lastErr = a.err
			continue
		}
		ids[a.res.TaskID] = true
		switch a.res.Outcome {
		case taskservice.Created:
			created++
		case taskservice.Replayed:
			replayed++
		case taskservice.Conflict:
			conflict++
		}
	}
	tasks, counted := r.count(ctx, req.IntentID)
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls at once: %d created, %d replayed", n, created, replayed)
	if conflict > 0 {
		fmt.Fprintf(&b, ", %d idempotency_conflict", conflict)
	}
	if failed > 0 {
		fmt.Fprintf(&b, ", %d failed (%v)", failed, lastErr)
	}
	if retried > 0 {
		fmt.Fprintf(&b, " (%d retried after a transient error)", retried)
	}
	if len(ids) == 1 {
		for id := range ids {
			fmt.Fprintf(&b, ", one task id %s", id)
		}
	} else if len(ids) > 1 {
		fmt.Fprintf(&b, ", %d task ids", len(ids))
	}
	b.WriteString(counted)
	row.Seen = b.String()
	switch {
	case created > 1 || tasks > 1 || len(ids) > 1:
		row.Status, row.Answer = Unsafe, plural(max(created, tasks), "create")
		row.Consequence = "concurrent deliveries of one approval create more than one task"
		row.Fix = fixAtomic
	case conflict > 0:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Consequence, row.Fix = "concurrent deliveries of one approval are reported as conflicts", fixAnswer
	case failed > 0:
		row.Status, row.Answer = Unsafe, "errors"
		row.Consequence, row.Fix = "concurrent deliveries of one approval fail even when retried and end dead-lettered", fixAnswer
	case created == 0:
		row.Status, row.Answer = Unknown, "no create"
		row.Seen += " (no call created the task)"
	default:
		row.Status, row.Answer = Safe, "1 create"
	}
	return row
}

func (r *runner) lostReply(ctx context.Context) Row {
	row := rowHead(RowLostReply)
	if r.t.LoseReplyHow != "" {
		row.Method = r.t.LoseReplyHow
	}
	if r.t.LoseReply == nil {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = "the target has no way to lose a reply"
		return row
	}
	req := r.request(RowLostReply, 0)
	row.IntentID = req.IntentID
	disarm, err := r.t.LoseReply(ctx)
	if err != nil {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = "a lost reply could not be arranged: " + err.Error()
		return row
	}
	res, lostErr := r.call(ctx, req, r.o.LostReplyWait)
	if disarm != nil {
		dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		derr := disarm(dctx)
		cancel()
		if derr != nil {
			row.Status, row.Answer = Unknown, "not measured"
			row.Seen = "the lost reply could not be disarmed: " + derr.Error()
			return row
		}
	}
	if lostErr == nil {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("the reply was not lost: the call answered %s %s", res.Outcome, res.TaskID)
		return row
	}
	first := fmt.Sprintf("the first call got no reply (%v)", lostErr)
	if taskservice.IsPermanent(lostErr) {
		_, counted := r.count(ctx, req.IntentID)
		row.Status, row.Answer = Unsafe, "permanent error"
		row.Seen = first + ", marked permanent" + counted
		row.Consequence, row.Fix = "a delivery whose reply was lost is dead-lettered although its task may exist", fixTransient
		return row
	}
	r2, n, err := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	after := ""
	if n > 0 {
		after = fmt.Sprintf(" after %s", plural(n, "more retry"))
	}
	switch {
	case err != nil:
		row.Status, row.Answer = Unsafe, "error"
		row.Seen = fmt.Sprintf("%s; the retry %s%s", first, failure(err), counted)
		row.Consequence, row.Fix = "a delivery whose reply was lost is dead-lettered although its task exists", fixAnswer
	case tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("%s; the retry: %s %s%s%s", first, r2.Outcome, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a redelivery after a lost reply creates a second task", fixRecordKey
	case r2.Outcome == taskservice.Created && tasks == 1:
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("%s; the retry: created %s%s: the lost call took no effect, so nothing was replayed", first, r2.TaskID, counted)
	case r2.Outcome == taskservice.Created:
		row.Status, row.Answer = Unsafe, "created again"
		row.Seen = fmt.Sprintf("%s; the retry: created %s%s (the target cannot count its tasks, so the worse is assumed: the lost call created one too)", first, r2.TaskID, after)
		row.Consequence, row.Fix = "a redelivery after a lost reply creates a second task", fixRecordKey
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Unsafe, "conflict"
		row.Seen = fmt.Sprintf("%s; the retry: idempotency_conflict %s%s%s", first, r2.TaskID, after, counted)
		row.Consequence, row.Fix = "a redelivery after a lost reply is reported as a conflict", fixRecordKey
	default:
		row.Status, row.Answer = Safe, "replayed"
		row.Seen = fmt.Sprintf("%s; the retry: replayed %s%s%s", first, r2.TaskID, after, counted)
	}
	return row
}

func (r *runner) afterDelete(ctx context.Context) Row {
	row := rowHead(RowAfterDelete)
	if r.t.Delete == nil {
		if r.t.NeverDeletes {
			row.Method = "stated by the adapter"
			row.Status, row.Answer = Safe, "yes (never deleted)"
			row.Seen = "the service has no way to delete a task: a key lasts as long as its store"
			return row
		}
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = "the target has no way to delete a task"
		return row
	}
	req := r.request(RowAfterDelete, 0)
	row.IntentID = req.IntentID
	r1, ok := r.first(ctx, &row, req)
	if !ok {
		return row
	}
	if !r.p.own(req.IntentID) || !strings.HasPrefix(req.IntentID, Prefix) {
		row.Status, row.Answer, row.Seen = Unknown, "not measured", "refused to delete an intent id that is not this run's"
		return row
	}
	dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	err := r.t.Delete(dctx, Scope, req.IntentID)
	cancel()
	if err != nil {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("created %s; deleting it failed: %v", r1.TaskID, err)
		return row
	}
	if left, _ := r.count(ctx, req.IntentID); left > 0 {
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("created %s and deleted it, but %s still there", r1.TaskID, plural(left, "task"))
		return row
	}
	r2, _, err := r.callRetry(ctx, req)
	tasks, counted := r.count(ctx, req.IntentID)
	switch {
	case err != nil:
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry %s%s", r1.TaskID, failure(err), counted)
	case tasks > 1:
		row.Status, row.Answer = Unsafe, "second task"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: %s %s%s", r1.TaskID, r2.Outcome, r2.TaskID, counted)
		row.Consequence, row.Fix = consSecond, fixLookUp
	case r2.Outcome == taskservice.Created:
		row.Status, row.Answer = Caveat, "no (created again)"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: created %s%s", r1.TaskID, r2.TaskID, counted)
		row.Consequence = "a deleted task is created again by a late resend within the approval's lifetime"
		row.Fix = fixTombstone
	case r2.Outcome == taskservice.Conflict:
		row.Status, row.Answer = Caveat, "yes (conflict)"
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: idempotency_conflict %s%s", r1.TaskID, r2.TaskID, counted)
		row.Consequence = "a late resend after a deletion is reported as a conflict, not as replayed"
		row.Fix = "answer a known key with the same body as replayed, also after its task was deleted"
	default:
		row.Status, row.Answer = Safe, "yes"
		deleted := ""
		if r2.TaskDeleted {
			deleted = " (task deleted)"
		}
		row.Seen = fmt.Sprintf("created %s and deleted it; the retry: replayed %s%s%s", r1.TaskID, r2.TaskID, deleted, counted)
	}
	return row
}

func (r *runner) scope(_ context.Context) Row {
	row := rowHead(RowScope)
	r.mu.Lock()
	stores := make([]string, 0, len(r.stores))
	for s := range r.stores {
		stores = append(stores, s)
	}
	r.mu.Unlock()
	slices.Sort(stores)
	var seen string
	switch len(stores) {
	case 0:
		seen = "the answers name no store"
	case 1:
		seen = "every answer came from store " + stores[0]
	default:
		seen = fmt.Sprintf("the answers came from %d stores: %s", len(stores), strings.Join(stores, ", "))
	}
	row.Answer = r.t.Scope
	switch {
	case len(stores) > 1:
		row.Status = Unsafe
		if row.Answer == "" {
			row.Answer = "several stores"
		}
		row.Seen = "stated: " + orNone(r.t.Scope) + "; " + seen
		row.Consequence = "a resend may reach a store that has not seen the key, and create a second task"
		row.Fix = fixOneScope
	case r.t.Scope == "":
		row.Status, row.Answer = Unknown, "not stated"
		row.Seen = "the adapter does not state its scope; " + seen
	default:
		row.Status = Safe
		row.Seen = "stated: " + r.t.Scope + "; " + seen
	}
	return row
}

// readAfterWrite checks what an adapter that decides a create by a lookup
// relies on: a lookup right after a create sees it. If it does not, a
// retry soon after a create (a lost reply, a redelivery) finds nothing and
// creates again.
func (r *runner) readAfterWrite(ctx context.Context) Row {
	row := rowHead(RowReadAfterWrite)
	if r.t.Find == nil {
		row.Status, row.Answer = NotApplicable, "not applicable"
		row.Seen = orDefault(r.t.FindWhyNot, "no lookup decides a create for this target")
		return row
	}
	req := r.request(RowReadAfterWrite, 0)
	row.IntentID = req.IntentID
	r1, ok := r.first(ctx, &row, req)
	if !ok {
		return row
	}
	fctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	res, found, err := r.t.Find(fctx, req)
	cancel()
	switch {
	case err != nil:
		row.Status, row.Answer = Unknown, "not measured"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it %s", r1.TaskID, failure(err))
	case !found:
		row.Status, row.Answer = Unsafe, "not seen"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found nothing", r1.TaskID)
		row.Consequence = "retries are unsafe: a retry soon after a create looks the key up, finds nothing and creates a second task"
		row.Fix = fixReadOwnWrites
	case res.TaskID != r1.TaskID:
		row.Status, row.Answer = Unsafe, "another task"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found %s", r1.TaskID, res.TaskID)
		row.Consequence = "retries are unsafe: a lookup right after a create names another task than the one created"
		row.Fix = fixReadOwnWrites
	default:
		row.Status, row.Answer = Safe, "seen at once"
		row.Seen = fmt.Sprintf("created %s; the lookup right after it found %s (%s)", r1.TaskID, res.TaskID, res.Outcome)
	}
	return row
}

// naive sends two plain creates with one key, as a retry without the
// adapter's protocol would, and counts the tasks they made; it then deletes
// them again, so that the key's doubled tasks are not left for verify to
// report. It is measured for comparison and never judged.
func (r *runner) naive(ctx context.Context) Row {
	row := rowHead(RowNaive)
	if r.t.Naive == nil {
		row.Status, row.Answer = NotApplicable, "not applicable"
		row.Seen = orDefault(r.t.NaiveWhyNot, "the target offers no create that bypasses its key")
		return row
	}
	row.Status = Info
	req := r.request(RowNaive, 0)
	row.IntentID = req.IntentID
	var seen []string
	ids := map[string]bool{}
	for range 2 {
		res, err := r.callOn(ctx, r.t.Naive, req, r.o.CallTimeout)
		if err != nil {
			seen = append(seen, failure(err))
			continue
		}
		ids[res.TaskID] = true
		seen = append(seen, fmt.Sprintf("%s %s", res.Outcome, res.TaskID))
	}
	tasks, counted := r.count(ctx, req.IntentID)
	if tasks < 0 {
		tasks = len(ids)
	}
	row.Answer = plural(tasks, "task")
	row.Seen = strings.Join(seen, ", then ") + counted
	if r.t.Delete != nil && r.p.own(req.IntentID) && strings.HasPrefix(req.IntentID, Prefix) && tasks != 0 {
		dctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		err := r.t.Delete(dctx, Scope, req.IntentID)
		cancel()
		if err != nil {
			row.Seen += fmt.Sprintf("; deleting them again failed (%v): verify reports the key's tasks", err)
		} else {
			left, _ := r.count(ctx, req.IntentID)
			row.Seen += fmt.Sprintf("; deleted again, %s left", plural(max(left, 0), "task"))
		}
	}
	return row
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

// Judge sums rows up into a verdict.
func Judge(rows []Row) Verdict {
	v := Verdict{Unsafe: []string{}, Unknown: []string{}, Caveats: []string{}, Fixes: []string{}}
	var unsafe, unknown []string
	for _, r := range rows {
		switch r.Status {
		case Unsafe:
			v.Unsafe = append(v.Unsafe, r.ID)
			unsafe = append(unsafe, fmt.Sprintf("%s (%s)", r.Consequence, r.Question))
			v.Fixes = append(v.Fixes, r.Question+": "+r.Fix)
		case Caveat:
			v.Caveats = append(v.Caveats, r.Consequence)
			v.Fixes = append(v.Fixes, r.Question+": "+r.Fix)
		case Unknown:
			v.Unknown = append(v.Unknown, r.ID)
			unknown = append(unknown, r.Question)
		}
	}
	switch {
	case len(unsafe) > 0:
		v.Headline = "unsafe for at-least-once delivery"
		v.Summary = v.Headline + ": " + strings.Join(unsafe, "; ")
	case len(unknown) > 0:
		v.Headline = "not proven safe for at-least-once delivery"
		v.Summary = v.Headline + ": not measured: " + strings.Join(unknown, "; ")
	default:
		v.Safe = true
		v.Headline = "safe for at-least-once delivery"
		v.Summary = v.Headline
		if len(v.Caveats) > 0 {
			v.Summary += ", with a caveat: " + strings.Join(v.Caveats, "; ")
		}
	}
	return v
}
