package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/taskservice"
)

// The story against a real service. Its figures come from two places only:
// the receipts the executor published (outcome, task id, delivery number)
// and the service's own listing of its tasks, read after each step. A real
// service keeps no counters of requests received and creates executed, so
// none are shown.

// seen is the listing reduced to the run's intents.
type seen struct {
	tasks  map[string][]taskservice.ListedTask // intent id → its tasks
	all    int                                 // every task the service lists
	ofRun  int                                 // the tasks of the run's intents
	listed bool
}

func (r *run) list(ctx context.Context) (seen, error) {
	lister, ok := r.opts.Service.Adapter.(taskservice.Lister)
	if !ok {
		return seen{}, fmt.Errorf("demo: the %s cannot list its tasks", r.opts.Service.Name)
	}
	l, err := lister.ListTasks(ctx)
	if err != nil {
		return seen{}, fmt.Errorf("demo: listing the tasks of the %s: %w", r.opts.Service.Name, err)
	}
	s := seen{tasks: map[string][]taskservice.ListedTask{}, all: l.Items, listed: true}
	for _, t := range l.Tasks {
		for _, id := range r.intents {
			if t.IntentID == id {
				s.tasks[id] = append(s.tasks[id], t)
				s.ofRun++
			}
		}
	}
	return s, nil
}

// letter names the run's intent ids A, B, C in the table.
func (r *run) letter(id string) string {
	for i, x := range r.intents {
		if x == id {
			return string(rune('A' + i))
		}
	}
	return id
}

// per says how many tasks each of ids has, as "A 1, B 1".
func (r *run) per(s seen, ids ...string) string {
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s %d", r.letter(id), len(s.tasks[id])))
	}
	return strings.Join(parts, ", ")
}

// one reports whether each of ids has exactly one task.
func one(s seen, ids ...string) bool {
	for _, id := range ids {
		if len(s.tasks[id]) != 1 {
			return false
		}
	}
	return true
}

// storyReal tells the story against a real service, under intent ids new
// in this run, reading the service's listing after each step.
func (r *run) storyReal(ctx context.Context) (err error) {
	before, err := r.list(ctx)
	if err != nil {
		return err
	}
	r.before = before.all
	e, err := r.runEnvelopes()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && !r.opts.KeepTasks {
			// The story stopped: what it made goes all the same.
			r.cleanup.deleted, r.cleanup.failed = r.deleteRunTasks(context.WithoutCancel(ctx))
		}
	}()
	first, firstDigest, err := r.sameApprovalTwiceReal(ctx, e)
	if err != nil {
		return err
	}
	if err := r.changedReal(ctx, e, first, firstDigest); err != nil {
		return err
	}
	if err := r.deletedReal(ctx, e, first); err != nil {
		return err
	}
	s, err := r.newIntentReal(ctx, e, first)
	if err != nil {
		return err
	}
	if err := r.tamperedReal(ctx, e, s); err != nil {
		return err
	}
	if s, err = r.lostReplyReal(ctx, e); err != nil {
		return err
	}
	// In the end: one task for B and for C, none for A (deleted).
	a, b, c := r.intents[0], r.intents[1], r.intents[2]
	r.rows = append(r.rows, Row{
		Step: "end", Intent: "A, B, C", Content: "—", Receipt: "—",
		Counts: fmt.Sprintf("%s (of all %d)", r.per(s, a, b, c), s.all),
		Want:   "A 0, B 1, C 1",
		OK:     len(s.tasks[a]) == 0 && one(s, b, c) && s.ofRun == 2,
	})
	return r.cleanupReal(ctx)
}

// cleanupReal deletes the run's tasks at the end of the story (those of B
// and C; A's owner deleted A's), unless told to keep them, and adds the
// row that shows the service's listing afterwards: without the run's tasks,
// as many as before the run.
func (r *run) cleanupReal(ctx context.Context) error {
	a, b, c := r.intents[0], r.intents[1], r.intents[2]
	if r.opts.KeepTasks {
		s, err := r.list(ctx)
		if err != nil {
			return err
		}
		r.cleanup.kept = s.ofRun
		r.rows = append(r.rows, Row{Step: "cleanup", Intent: "A, B, C", Content: "—", Receipt: "kept (--keep-tasks)",
			Counts: fmt.Sprintf("%s (of all %d)", r.per(s, a, b, c), s.all), Want: "A 0, B 1, C 1", OK: len(s.tasks[a]) == 0 && one(s, b, c) && s.ofRun == 2})
		return nil
	}
	r.cleanup.deleted, r.cleanup.failed = r.deleteRunTasks(ctx)
	s, err := r.list(ctx)
	if err != nil {
		return err
	}
	r.rows = append(r.rows, Row{Step: "cleanup", Intent: "A, B, C", Content: "—",
		Receipt: fmt.Sprintf("deleted %d", r.cleanup.deleted),
		Counts:  fmt.Sprintf("%s (of all %d)", r.per(s, a, b, c), s.all),
		Want:    fmt.Sprintf("A 0, B 0, C 0 (of all %d, as before the run)", r.before),
		OK:      s.ofRun == 0 && s.all == r.before && len(r.cleanup.failed) == 0})
	return nil
}

// deleteRunTasks deletes every task the service lists for the run's intent
// ids, in the demo's scope, and returns how many it deleted and why others
// could not be.
func (r *run) deleteRunTasks(ctx context.Context) (int, []string) {
	ctx, cancel := context.WithTimeout(ctx, 4*r.callTimeout())
	defer cancel()
	s, err := r.list(ctx)
	if err != nil {
		return 0, []string{err.Error()}
	}
	var deleted int
	var failed []string
	for _, id := range r.intents {
		if len(s.tasks[id]) == 0 {
			continue
		}
		if err := r.deleteTask(ctx, id); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s): %v", r.letter(id), id, err))
			continue
		}
		deleted += len(s.tasks[id])
	}
	return deleted, failed
}

// runEnvelopes picks the run's intent ids A, B and C and approves the
// story's messages under them. The tampered messages are the seed's: the
// gate stops them, so their intent ids never reach the service.
func (r *run) runEnvelopes() (envelopes, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return envelopes{}, fmt.Errorf("demo: picking a run id: %w", err)
	}
	runID := hex.EncodeToString(b[:])
	a, bb, c := "demo-"+runID+"-intent-0001", "demo-"+runID+"-intent-0002", "demo-"+runID+"-intent-0003"
	r.intents = []string{a, bb, c}

	now := time.Now().UTC().Truncate(time.Second)
	cand := scenario.Candidate()
	var e envelopes
	for _, m := range []struct {
		n, intent, title string
		into             *[]byte
	}{
		{"0001", a, TitlePrefix + scenario.Title, &e.original},
		{"0002", a, TitlePrefix + scenario.ChangedTitle, &e.changed},
		{"0003", bb, TitlePrefix + scenario.Title, &e.newIntent},
		{"0004", c, TitlePrefix + scenario.Title, &e.lost},
	} {
		approved, err := r.target().InScope(Scope).ApproveWith(cand, "task-request-"+m.n, m.intent, m.title,
			approve.Options{ID: "approval-" + m.n, Key: r.key, At: now, Lifetime: time.Hour})
		if err != nil {
			return envelopes{}, fmt.Errorf("demo: %w", err)
		}
		*m.into = approved.Envelope()
	}
	seed, err := scenario.BuildSigned(r.key, now, time.Hour)
	if err != nil {
		return envelopes{}, fmt.Errorf("demo: %w", err)
	}
	e.tampered = tamperedCases(seed)
	return e, nil
}

// target is what the story's requests are for: the real service's
// provider and destination.
func (r *run) target() scenario.For {
	d := destinationOf(r.opts.Service)
	if d.Name == document.DefaultDestination {
		d.Name = ""
	}
	return scenario.For{Provider: d.Provider, Destination: d.Name}
}

// addReal adds a row of the story against a real service: it is ok only
// when the service could be listed after the step.
func (r *run) addReal(step, intent, content string, rc *document.Receipt, s seen, listed string, ok bool, want string) {
	r.rows = append(r.rows, Row{Step: step, Intent: intent, Content: content, Receipt: receiptText(rc),
		Counts: listed, Want: want, OK: ok && s.listed})
}

// sameApprovalTwiceReal is steps 1 and 2: one task for A, replayed. It
// returns A's task id and the request digest the service keeps for it.
func (r *run) sameApprovalTwiceReal(ctx context.Context, e envelopes) (first, firstDigest string, err error) {
	a := r.intents[0]
	rc, err := r.sameApprovalTwice(ctx, e, func(rc *document.Receipt) error {
		s, err := r.list(ctx)
		if err != nil {
			return err
		}
		first = deref(rc.TaskID)
		if one(s, a) {
			firstDigest = s.tasks[a][0].RequestDigest
		}
		r.addReal("1", "A", "original", rc, s, r.per(s, a),
			rc.Outcome == document.OutcomeCreated && first != "" && one(s, a) && s.tasks[a][0].TaskID == first,
			"created; A 1")
		return nil
	})
	if err != nil {
		return "", "", err
	}
	s, err := r.list(ctx)
	if err != nil {
		return "", "", err
	}
	r.addReal("2", "A (second publisher process)", "original", rc, s, r.per(s, a),
		rc.Outcome == document.OutcomeReplayed && deref(rc.TaskID) == first && one(s, a),
		"replayed "+first+"; A 1")
	return first, firstDigest, nil
}

// sendAndList sends env, as what, and then lists the service's tasks: the
// receipt and the listing after it.
func (r *run) sendAndList(ctx context.Context, what string, env []byte) (*document.Receipt, seen, error) {
	rc, err := r.send(ctx, what, env)
	if err != nil {
		return nil, seen{}, err
	}
	s, err := r.list(ctx)
	if err != nil {
		return nil, seen{}, err
	}
	return rc, s, nil
}

// changedReal is step 3: the same intent with changed content and its own
// approval; the service keeps A's task and its digest.
func (r *run) changedReal(ctx context.Context, e envelopes, first, firstDigest string) error {
	a := r.intents[0]
	rc, s, err := r.sendAndList(ctx, "step 3", e.changed)
	if err != nil {
		return err
	}
	kept := one(s, a) && firstDigest != "" && s.tasks[a][0].RequestDigest == firstDigest
	listed := r.per(s, a)
	if kept {
		listed += ", its digest unchanged"
	}
	r.addReal("3", "A", "changed, with its own approval", rc, s, listed,
		rc.Outcome == document.OutcomeConflict && deref(rc.TaskID) == first && kept,
		"idempotency_conflict "+first+"; A 1, its digest unchanged")
	return nil
}

// deletedReal is step 4: A's owner deletes its task in the service
// itself, and A's approval is sent again. The service alone would create
// it again; with the intent ledger the resend is replayed with the first
// task id, marked deleted, and A has no task.
func (r *run) deletedReal(ctx context.Context, e envelopes, first string) error {
	a := r.intents[0]
	if !r.opts.skipDelete {
		if err := r.deleteTask(ctx, a); err != nil {
			return fmt.Errorf("demo: step 4: deleting A's task as its owner: %w", err)
		}
	}
	rc, s, err := r.sendAndList(ctx, "step 4", e.original)
	if err != nil {
		return err
	}
	r.addReal("4", "A (its task deleted by its owner)", "original", rc, s, r.per(s, a),
		rc.Outcome == document.OutcomeReplayed && deref(rc.TaskID) == first && rc.TaskDeleted && len(s.tasks[a]) == 0,
		"replayed "+first+" (task deleted); A 0")
	if rc.TaskDeleted {
		r.rows[len(r.rows)-1].Receipt += " (task deleted)"
	}
	return nil
}

// newIntentReal is step 5: another intent with the same content, another
// task. It returns the listing after it.
func (r *run) newIntentReal(ctx context.Context, e envelopes, first string) (seen, error) {
	a, b := r.intents[0], r.intents[1]
	rc, s, err := r.sendAndList(ctx, "step 5", e.newIntent)
	if err != nil {
		return seen{}, err
	}
	r.addReal("5", "B", "same content as A", rc, s, r.per(s, a, b),
		rc.Outcome == document.OutcomeCreated && deref(rc.TaskID) != "" && deref(rc.TaskID) != first && len(s.tasks[a]) == 0 && one(s, b),
		"created, another task; A 0, B 1")
	return s, nil
}

// tamperedReal sends the tampered messages: each rejected at its check;
// the service's listing (before) does not change.
func (r *run) tamperedReal(ctx context.Context, e envelopes, before seen) error {
	checks, ok, err := r.sendTampered(ctx, e, func(rc *document.Receipt) bool { return rc.TaskID == nil })
	if err != nil {
		return err
	}
	s, err := r.list(ctx)
	if err != nil {
		return err
	}
	r.tamperedRow(checks, fmt.Sprintf("all %d → %d", before.all, s.all),
		"rejected at their checks; the listing unchanged", ok && before.all == s.all && before.ofRun == s.ofRun)
	return nil
}

// lostReplyReal sends C once with the service's answer lost after it
// acted: the message comes back and the service replays. It returns the
// listing after it.
func (r *run) lostReplyReal(ctx context.Context, e envelopes) (seen, error) {
	svc, c := r.opts.Service, r.intents[2]
	if svc.LoseReply == nil {
		return seen{}, fmt.Errorf("demo: the %s has no way to lose a reply", svc.Name)
	}
	arm := func(ctx context.Context) (func(context.Context) error, error) {
		disarm, err := svc.LoseReply(ctx)
		if err != nil {
			return nil, fmt.Errorf("demo: arranging a lost reply: %w", err)
		}
		return disarm, nil
	}
	rc, err := r.sendReplyLost(ctx, "lost reply", arm, e.lost)
	if err != nil {
		return seen{}, err
	}
	s, err := r.list(ctx)
	if err != nil {
		return seen{}, err
	}
	r.addReal("one publish, reply lost", "C", "original", rc, s, r.per(s, c),
		rc.Outcome == document.OutcomeReplayed && rc.Delivery.Delivered >= 2 && deref(rc.TaskID) != "" && one(s, c),
		"(delivery 2 or later) replayed; C 1")
	r.rows[len(r.rows)-1].Receipt = withDelivery(rc)
	return s, nil
}

func (r *run) printReal() {
	out := r.opts.Out
	fmt.Fprintf(out, "task service: %s (the fake task service is stopped)\n", r.opts.Service.Name)
	fmt.Fprintf(out, "the run's tasks: scope %s, titles starting %q\n", Scope, TitlePrefix)
	for _, id := range r.intents {
		fmt.Fprintf(out, "intent %s: %s\n", r.letter(id), id)
	}
	fmt.Fprintln(out)
	r.printTable("tasks listed by the service")
	fmt.Fprintf(out, `
Where the figures come from:
  receipt: the receipt the executor published for the step (outcome, task id, delivery).
  tasks listed by the service: the service's own listing, read after the step, counted per
    intent of this run ("all" counts every task it lists, others' included).
  A real service keeps no counters of requests received and creates executed, so none are
  shown; the tests count those from the server's own request log.
`)
	switch {
	case r.opts.KeepTasks:
		fmt.Fprintf(out, "\ncleanup: kept the run's %s (--keep-tasks); they are in scope %s, titled %q\n", tasks(r.cleanup.kept), Scope, TitlePrefix)
	default:
		fmt.Fprintf(out, "\ncleanup: deleted the run's %s; the service lists %s, as before the run\n", tasks(r.cleanup.deleted), tasks(r.before))
	}
	for _, f := range r.cleanup.failed {
		fmt.Fprintf(out, "  not deleted: %s\n", f)
	}
}

// callTimeout bounds one call to the real service.
func (r *run) callTimeout() time.Duration {
	if t := r.opts.CallTimeout; t > 0 {
		return t
	}
	return 10 * time.Second
}

// tasks says "1 task", "2 tasks".
func tasks(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

// deleteTask deletes the task of intentID in the story's scope as its
// owner would, through the real service's adapter.
func (r *run) deleteTask(ctx context.Context, intentID string) error {
	d, ok := r.opts.Service.Adapter.(taskservice.Deleter)
	if !ok {
		return fmt.Errorf("demo: the %s has no way to delete a task", r.opts.Service.Name)
	}
	return d.DeleteTask(ctx, Scope, intentID)
}
