package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// Prefix starts every intent id the probe makes: "probe-<run id>-<row>".
const Prefix = servicetest.Prefix

// Scope is the caller scope of every call the probe makes, and TitlePrefix
// starts every title: its tasks are told apart from a pipeline's (verify
// lists them apart, a person sees them in a task list for what they are).
const (
	Scope       = servicetest.Scope
	TitlePrefix = servicetest.TitlePrefix
)

// Defaults of Options that the command shows, and the bound on
// Options.Concurrency: the probe is a short experiment, not a load test.
const (
	DefaultConcurrency = servicetest.DefaultConcurrency
	DefaultCallTimeout = servicetest.DefaultCallTimeout
	MaxConcurrency     = servicetest.MaxConcurrency
)

// Target is a task service to probe, as an adapter presents it: the
// conformance suite's Target (the probe calls Delete only with its Scope
// and intent ids it made), and Provider and Destination, which the probe's
// requests name, so that a service that routes calls by them (an
// executor's router over several destinations) sends them to the target;
// empty means the fake task service's default destination. Suite gives
// the conformance suite's Target.
type Target struct {
	servicetest.Target
	Provider, Destination string
}

// Options tune a run; the zero value takes every default. The
// conformance suite's Options mean what they mean there.
type Options struct {
	servicetest.Options
	// KeepTasks leaves the run's tasks in place at its end; by default
	// the run deletes them (Target.Delete), so that the service's list is
	// as it was.
	KeepTasks bool
}

// Row ids, in the order of the report: the rows of the conformance suite
// (package taskservice/servicetest) that the probe measures.
const (
	RowRetry          = servicetest.RowRetry
	RowConflict       = servicetest.RowConflict
	RowConcurrent     = servicetest.RowConcurrent
	RowLostReply      = servicetest.RowLostReply
	RowAfterDelete    = servicetest.RowAfterDelete
	RowScope          = servicetest.RowScope
	RowReadAfterWrite = servicetest.RowReadAfterWrite
	RowNaive          = servicetest.RowNaive
)

// rows are the ids of the rows the probe measures, in the order of the
// report.
var rows = []string{RowRetry, RowConflict, RowConcurrent, RowLostReply, RowAfterDelete, RowScope, RowReadAfterWrite, RowNaive}

// Status is a row's judgement (servicetest.Status).
type Status = servicetest.Status

// Statuses of a row.
const (
	Safe          = servicetest.Safe
	Caveat        = servicetest.Caveat
	Unsafe        = servicetest.Unsafe
	Unknown       = servicetest.Unknown
	Info          = servicetest.Info
	NotApplicable = servicetest.NotApplicable
)

// Row is one question and its answer (servicetest.Row).
type Row = servicetest.Row

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
	rows, err := servicetest.NewRows(t.Suite(), o.Options)
	if err != nil {
		return Plan{}, fmt.Errorf("probe: %w", err)
	}
	// The rows' defaults, but for the calls' expiry: the run's rows fix
	// that when it starts.
	resolved := rows.Options()
	resolved.NotAfter = o.NotAfter
	resolved.Retries = max(resolved.Retries, 0)
	o.Options = resolved
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
// id (servicetest.Rows); a row whose calls fail in a way that says nothing
// about keys is Unknown. Run returns an error only when ctx ends before the
// script does; the report then holds the rows measured so far and the rest
// as unknown.
func Run(ctx context.Context, t Target, p Plan) (*Report, error) {
	if t.Service == nil || p.Prefix == "" {
		return nil, errors.New("probe: run needs a target and a plan from NewPlan")
	}
	so := p.opts.Options
	if so.Retries == 0 {
		so.Retries = -1 // NewPlan's zero is none
	}
	r, err := servicetest.NewRows(t.Suite(), so)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	o := r.Options()
	rep := &Report{Target: p.Target, Scope: t.Scope, Class: t.Class, RunID: p.RunID, Prefix: p.Prefix, Concurrency: o.Concurrency}
	for _, id := range rows {
		var row Row
		if err == nil {
			row = r.Measure(ctx, id)
			if ctx.Err() != nil {
				err = fmt.Errorf("probe: stopped during %q: %w", id, context.Cause(ctx))
				row.Status, row.Answer = Unknown, "not measured"
				row.Seen = "stopped before the row was finished: " + context.Cause(ctx).Error()
				row.Consequence, row.Fix = "", ""
			}
		} else {
			row = servicetest.Head(id)
			row.Status, row.Answer, row.Seen = Unknown, "not measured", "not run: the probe was stopped"
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Calls = r.Calls()
	rep.Verdict = Judge(rep.Rows)
	rep.Cleanup = cleanup(ctx, t, p)
	return rep, err
}
