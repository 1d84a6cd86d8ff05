package demo

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// The steps both stories take, against the fake task service (story) and
// against a real one (storyReal): the same messages, sent the same way.
// Only what is read after a step differs: the fake service's counters, or
// a real service's listing.

// envelopes are the messages a story sends.
type envelopes struct {
	// original is A as approved; changed is A with another title and its
	// own approval; newIntent is B, with A's content.
	original, changed, newIntent []byte
	// lost is C, sent once while its reply is lost.
	lost []byte
	// tampered are stopped by the gate, each at its own check.
	tampered []scenario.Tampered
}

// send publishes env from this process and waits for its receipt; what
// names the step in an error.
func (r *run) send(ctx context.Context, what string, env []byte) (*document.Receipt, error) {
	rc, err := r.sendHere(ctx, r.stack.URL(), env)
	if err != nil {
		return nil, fmt.Errorf("demo: %s: %w", what, err)
	}
	return rc, nil
}

// sameApprovalTwice is steps 1 and 2: A sent by one publisher process,
// then, after between has seen the first receipt, sent again by a second
// one (Options.Process, else from this process). It returns the second
// receipt.
func (r *run) sameApprovalTwice(ctx context.Context, e envelopes, between func(first *document.Receipt) error) (*document.Receipt, error) {
	process := r.opts.Process
	if process == nil {
		process = r.sendHere
	}
	first, err := process(ctx, r.stack.URL(), e.original)
	if err != nil {
		return nil, fmt.Errorf("demo: step 1: %w", err)
	}
	if err := between(first); err != nil {
		return nil, err
	}
	second, err := process(ctx, r.stack.URL(), e.original)
	if err != nil {
		return nil, fmt.Errorf("demo: step 2: %w", err)
	}
	return second, nil
}

// sendTampered sends the tampered messages. ok says that each was rejected
// at its own check and, by untouched, left the task service alone; checks
// are the checks that rejected them, in order.
func (r *run) sendTampered(ctx context.Context, e envelopes, untouched func(*document.Receipt) bool) (checks []string, ok bool, err error) {
	ok = true
	for _, t := range e.tampered {
		rc, err := r.send(ctx, "tampered "+t.Name, t.Envelope)
		if err != nil {
			return nil, false, err
		}
		got := ""
		if rc.Rejection != nil {
			got = rc.Rejection.Check
		}
		checks = append(checks, got)
		ok = ok && rc.Outcome == document.OutcomeRejected && got == t.Check && untouched(rc)
	}
	return checks, ok, nil
}

// tamperedRow is the table's row of the tampered messages.
func (r *run) tamperedRow(checks []string, seen, want string, ok bool) {
	r.rows = append(r.rows, Row{
		Step: fmt.Sprintf("%d tampered messages", len(checks)), Intent: "—", Content: "—",
		Receipt: "rejected at " + strings.Join(uniq(checks), ", "),
		Counts:  seen, Want: want, OK: ok,
	})
}

// sendReplyLost sends env once, with the answer to the service's next
// create lost after it acted (arm arranges it and returns what disarms
// it): the executor's call fails, the message comes back, and the service
// replays.
func (r *run) sendReplyLost(ctx context.Context, what string, arm func(context.Context) (func(context.Context) error, error), env []byte) (*document.Receipt, error) {
	disarm, err := arm(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := r.send(ctx, what, env)
	if derr := disarm(ctx); err == nil && derr != nil {
		err = fmt.Errorf("demo: %s: disarming the lost reply: %w", what, derr)
	}
	return rc, err
}

// receiptText is a receipt's outcome and task id.
func receiptText(rc *document.Receipt) string {
	got := rc.Outcome
	if rc.TaskID != nil {
		got += " " + *rc.TaskID
	}
	return got
}

// withDelivery is receiptText after the delivery it came from.
func withDelivery(rc *document.Receipt) string {
	return fmt.Sprintf("(delivery %d) %s", rc.Delivery.Delivered, receiptText(rc))
}

// purpose is why the demo's stores start empty and replace one another:
// its task service logs it instead of a deployment's alarms.
const purpose = "the demo starts every store of the task service empty; a new store shows a service that has forgotten every intent"

// shows sets what the last row shows.
func (r *run) shows(text string) { r.rows[len(r.rows)-1].Shows = text }

func (r *run) print() {
	r.printTable("requests, creates, tasks")
	fmt.Fprintln(r.opts.Out, "\nWhat each row shows (A, B and C are the intent ids intent-0001, intent-0002 and intent-0003;\n"+
		"the figures are the fake task service's counters as each receipt carries them: requests\n"+
		"received, creates executed, tasks existing):")
	r.printShows()
}

// printShows writes what each row shows, under its step, wrapped.
func (r *run) printShows() {
	const width = 100
	indent := 0
	for _, row := range r.rows {
		indent = max(indent, len(row.Step))
	}
	indent += 4
	for _, row := range r.rows {
		line := fmt.Sprintf("  %-*s", indent-2, row.Step)
		for _, word := range strings.Fields(row.Shows) {
			if len(line)+1+len(word) > width && len(line) > indent {
				fmt.Fprintln(r.opts.Out, line)
				line = strings.Repeat(" ", indent)
			} else if len(line) > indent {
				line += " "
			}
			line += word
		}
		fmt.Fprintln(r.opts.Out, line)
	}
}

// printTable writes the rows, with figures the column named figures.
func (r *run) printTable(figures string) {
	tw := tabwriter.NewWriter(r.opts.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tintent\tcontent\treceipt\t%s\tcheck\n", figures)
	for _, row := range r.rows {
		mark := "ok"
		if !row.OK {
			mark = "DIFFERS, want " + row.Want
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Step, row.Intent, row.Content, row.Receipt, row.Counts, mark)
	}
	tw.Flush()
}
