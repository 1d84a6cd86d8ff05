package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// The story against a real service. Its figures come from two places only:
// the receipts the executor published (outcome, task id, delivery number)
// and the service's own listing of its tasks, read after each step. A real
// service keeps no counters of requests received and creates executed, so
// none are shown.

// seen is the listing reduced to the run's intents.
type seen struct {
	tasks  map[string][]ListedTask // intent id → its tasks
	all    int                     // every task the service lists
	ofRun  int                     // the tasks of the run's intents
	listed bool
}

func (r *run) list(ctx context.Context) (seen, error) {
	l, err := r.opts.Service.List(ctx)
	if err != nil {
		return seen{}, fmt.Errorf("demo: listing the tasks of the %s: %w", r.opts.Service.Name, err)
	}
	s := seen{tasks: map[string][]ListedTask{}, all: l.All, listed: true}
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

func receiptText(rc *document.Receipt) string {
	got := rc.Outcome
	if rc.TaskID != nil {
		got += " " + *rc.TaskID
	}
	return got
}

func (r *run) storyReal(ctx context.Context) error {
	svc := r.opts.Service
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("demo: picking a run id: %w", err)
	}
	runID := hex.EncodeToString(b[:])
	a, bb, c := "demo-"+runID+"-intent-0001", "demo-"+runID+"-intent-0002", "demo-"+runID+"-intent-0003"
	r.intents = []string{a, bb, c}

	now := time.Now().UTC().Truncate(time.Second)
	cand := scenario.Candidate()
	approveAs := func(n, intent, title string) (scenario.Approved, error) {
		return scenario.ApproveWith(cand, "task-request-"+n, intent, title,
			approve.Options{ID: "approval-" + n, Key: r.key, At: now, Lifetime: time.Hour})
	}
	orig, err := approveAs("0001", a, scenario.Title)
	if err != nil {
		return err
	}
	changed, err := approveAs("0002", a, scenario.ChangedTitle)
	if err != nil {
		return err
	}
	newIntent, err := approveAs("0003", bb, scenario.Title)
	if err != nil {
		return err
	}
	lost, err := approveAs("0004", c, scenario.Title)
	if err != nil {
		return err
	}
	// The tampered messages are the seed's: the gate stops them, so their
	// intent ids never reach the service.
	seed, err := scenario.BuildSigned(r.key, now, time.Hour)
	if err != nil {
		return err
	}
	process := r.opts.Process
	if process == nil {
		process = r.sendHere
	}
	add := func(step, intent, content string, rc *document.Receipt, s seen, counts string, ok bool, want string) {
		got := "—"
		if rc != nil {
			got = receiptText(rc)
		}
		r.rows = append(r.rows, Row{Step: step, Intent: intent, Content: content, Receipt: got, Counts: counts, Want: want, OK: ok && s.listed})
	}

	// 1: the first publisher process sends A.
	rc, err := process(ctx, r.stack.URL(), orig.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 1: %w", err)
	}
	first := deref(rc.TaskID)
	s, err := r.list(ctx)
	if err != nil {
		return err
	}
	firstDigest := ""
	if one(s, a) {
		firstDigest = s.tasks[a][0].RequestDigest
	}
	add("1", "A", "original", rc, s, r.per(s, a),
		rc.Outcome == document.OutcomeCreated && first != "" && one(s, a) && s.tasks[a][0].TaskID == first,
		"created; A 1")

	// 2: a second publisher process sends A again.
	rc, err = process(ctx, r.stack.URL(), orig.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 2: %w", err)
	}
	if s, err = r.list(ctx); err != nil {
		return err
	}
	add("2", "A (second publisher process)", "original", rc, s, r.per(s, a),
		rc.Outcome == document.OutcomeReplayed && deref(rc.TaskID) == first && one(s, a),
		"replayed "+first+"; A 1")

	// 3: the same intent with changed content and its own approval.
	rc, err = r.sendHere(ctx, r.stack.URL(), changed.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 3: %w", err)
	}
	if s, err = r.list(ctx); err != nil {
		return err
	}
	kept := one(s, a) && firstDigest != "" && s.tasks[a][0].RequestDigest == firstDigest
	counts := r.per(s, a)
	if kept {
		counts += ", its digest unchanged"
	}
	add("3", "A", "changed, with its own approval", rc, s, counts,
		rc.Outcome == document.OutcomeConflict && deref(rc.TaskID) == first && kept,
		"idempotency_conflict "+first+"; A 1, its digest unchanged")

	// 4: another intent with the same content.
	rc, err = r.sendHere(ctx, r.stack.URL(), newIntent.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 4: %w", err)
	}
	if s, err = r.list(ctx); err != nil {
		return err
	}
	add("4", "B", "same content as A", rc, s, r.per(s, a, bb),
		rc.Outcome == document.OutcomeCreated && deref(rc.TaskID) != "" && deref(rc.TaskID) != first && one(s, a, bb),
		"created, another task; A 1, B 1")

	// Tampered messages: each rejected at its check; the service's listing
	// does not change.
	before := s
	var checks []string
	ok := true
	for _, t := range tamperedCases(seed) {
		rc, err := r.sendHere(ctx, r.stack.URL(), t.Envelope)
		if err != nil {
			return fmt.Errorf("demo: tampered %s: %w", t.Name, err)
		}
		got := ""
		if rc.Rejection != nil {
			got = rc.Rejection.Check
		}
		checks = append(checks, got)
		ok = ok && rc.Outcome == document.OutcomeRejected && got == t.Check && rc.TaskID == nil
	}
	if s, err = r.list(ctx); err != nil {
		return err
	}
	r.rows = append(r.rows, Row{
		Step: fmt.Sprintf("%d tampered messages", len(checks)), Intent: "—", Content: "—",
		Receipt: "rejected at " + strings.Join(uniq(checks), ", "),
		Counts:  fmt.Sprintf("all %d → %d", before.all, s.all),
		Want:    "rejected at their checks; the listing unchanged",
		OK:      ok && before.all == s.all && before.ofRun == s.ofRun,
	})

	// One publish whose answer is lost after the service acted: the
	// executor's call fails, the message comes back, and the service
	// replays.
	if svc.LoseReply == nil {
		return fmt.Errorf("demo: the %s has no way to lose a reply", svc.Name)
	}
	disarm, err := svc.LoseReply(ctx)
	if err != nil {
		return fmt.Errorf("demo: arranging a lost reply: %w", err)
	}
	rc, err = r.sendHere(ctx, r.stack.URL(), lost.Envelope())
	if derr := disarm(ctx); err == nil && derr != nil {
		err = fmt.Errorf("disarming the lost reply: %w", derr)
	}
	if err != nil {
		return fmt.Errorf("demo: lost reply: %w", err)
	}
	if s, err = r.list(ctx); err != nil {
		return err
	}
	add("one publish, reply lost", "C", "original", rc, s, r.per(s, c),
		rc.Outcome == document.OutcomeReplayed && rc.Delivery.Delivered >= 2 && deref(rc.TaskID) != "" && one(s, c),
		"(delivery 2 or later) replayed; C 1")
	r.rows[len(r.rows)-1].Receipt = fmt.Sprintf("(delivery %d) %s", rc.Delivery.Delivered, receiptText(rc))

	// In the end: one task per intent of the run.
	r.rows = append(r.rows, Row{
		Step: "end", Intent: "A, B, C", Content: "—", Receipt: "—",
		Counts: fmt.Sprintf("%s (of all %d)", r.per(s, a, bb, c), s.all),
		Want:   "A 1, B 1, C 1",
		OK:     one(s, a, bb, c) && s.ofRun == 3,
	})
	return nil
}

func (r *run) printReal() {
	out := r.opts.Out
	fmt.Fprintf(out, "task service: %s (the fake task service is stopped)\n", r.opts.Service.Name)
	for _, id := range r.intents {
		fmt.Fprintf(out, "intent %s: %s\n", r.letter(id), id)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tintent\tcontent\treceipt\ttasks listed by the service\tcheck")
	for _, row := range r.rows {
		mark := "ok"
		if !row.OK {
			mark = "DIFFERS, want " + row.Want
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Step, row.Intent, row.Content, row.Receipt, row.Counts, mark)
	}
	tw.Flush()
	fmt.Fprintf(out, `
Where the figures come from:
  receipt: the receipt the executor published for the step (outcome, task id, delivery).
  tasks listed by the service: the service's own listing, read after the step, counted per
    intent of this run ("all" counts every task it lists, others' included).
  A real service keeps no counters of requests received and creates executed, so none are
  shown; the tests count those from the server's own request log.
`)
}
