package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

// Help is redrive's usage.
const Help = `redrive (--seq N | --all) [--server URL] [--wait DURATION] [--force] [--dry-run] [--json]

Republishes dead-lettered approvals so that they are carried out after all, for example once
the task service is back after an outage. Each dead letter's payload (the original envelope,
unchanged) is published as a new message on the APPROVALS subject of its intent, with a new
message id (128 random bits) and, for the executors' logs, the header Sendtwice-Redrive-Of
naming the dead letter's sequence. The task service is keyed by the intent id, so a redriven
approval comes back created when no earlier attempt reached the service and replayed when one
did; it never creates a second task.

--seq N takes the dead letter at sequence N of the DEADLETTERS stream; --all takes every dead
letter stored when the command starts, each once. Each redrive is recorded, once published, in
the key-value bucket sendtwice-redrives (made by executor provision; under deploy/auth only the
operator writes it); redrive believes that record alone, never a header of an APPROVALS
message. A dead letter recorded as redriven is not republished again: --seq refuses it and
--all skips it, unless --force is given. One redriven before the record existed, or whose
record was lost to a crash after publishing, is republished again (answered replayed). Dead
letters are only read, never removed. --dry-run prints what would be republished and publishes
nothing. With --wait, waits for the receipt of each republished message and prints its outcome;
it subscribes to each intent's receipts before republishing its message and reads the stored
receipts back, so it creates no consumer however many it waits for.

Exit status: 0 every dead letter taken was republished or skipped as already redriven (and,
with --wait, each came back created or replayed); 1 an error, a dead letter that is not there
or already redriven (nothing published), or with --wait another outcome or no receipt in time;
2 usage.`

// ReportItem is one dead letter in redrive's report.
type ReportItem struct {
	DeadLetterSeq  uint64   `json:"dead_letter_seq"`
	ApprovalSeq    uint64   `json:"approval_seq"`
	IntentID       string   `json:"intent_id"`
	Scope          string   `json:"scope"`
	Reason         string   `json:"reason"`
	Action         string   `json:"action"` // redriven, skipped or would_redrive
	NewApprovalSeq uint64   `json:"new_approval_seq,omitempty"`
	RedrivenAs     []uint64 `json:"redriven_as,omitempty"`
	Outcome        string   `json:"outcome,omitempty"`
	TaskID         *string  `json:"task_id,omitempty"`
	WaitError      string   `json:"wait_error,omitempty"`
}

// Report is redrive's --json output.
type Report struct {
	Items []*ReportItem `json:"dead_letters"`
	Error string        `json:"error,omitempty"`
}

// Config is redrive's flags, as given.
type Config struct {
	fs      *flag.FlagSet
	conn    *cli.ConnConfig
	seq     *uint64
	all     *bool
	wait    *time.Duration
	force   *bool
	dryRun  *bool
	asJSON  *bool
	timeout *time.Duration
}

// FlagsVar defines redrive's flags on fs.
func FlagsVar(fs *flag.FlagSet) *Config {
	conn := cli.ConnFlags(fs)
	seq := fs.Uint64("seq", 0, "redrive the dead letter at sequence `N` of the DEADLETTERS stream")
	all := fs.Bool("all", false, "redrive every dead letter not recorded as redriven")
	wait := fs.Duration("wait", 0, "wait up to `DURATION` in all for the receipts of the republished messages; 0 does not wait")
	force := fs.Bool("force", false, "republish also a dead letter recorded as redriven")
	dryRun := fs.Bool("dry-run", false, "print what would be republished; publish nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up reading and publishing after `DURATION` (the wait for receipts is bounded by --wait alone)")
	return &Config{fs: fs, conn: conn, seq: seq, all: all, wait: wait, force: force, dryRun: dryRun, asJSON: asJSON, timeout: timeout}
}

// Run runs redrive with its parsed flags: it republishes the dead letters
// taken and reports on each on stdout.
func Run(ctx context.Context, cf *Config, stdout io.Writer) error {
	seqGiven := false
	cf.fs.Visit(func(f *flag.Flag) {
		if f.Name == "seq" {
			seqGiven = true
		}
	})
	switch {
	case seqGiven && *cf.all:
		return redriveUsage(cf.fs, "give --seq N or --all, not both")
	case !seqGiven && !*cf.all:
		return redriveUsage(cf.fs, "give --seq N (one dead letter) or --all (every dead letter)")
	case seqGiven && *cf.seq == 0:
		return redriveUsage(cf.fs, "--seq must be a dead letter's sequence, 1 or more")
	case *cf.wait < 0:
		return redriveUsage(cf.fs, "--wait must not be negative")
	case *cf.timeout <= 0:
		return redriveUsage(cf.fs, "--timeout must be positive")
	case *cf.dryRun && *cf.wait > 0:
		return redriveUsage(cf.fs, "--dry-run publishes nothing, so there is nothing to --wait for")
	}
	c, rctx, done, err := cf.conn.OpenWithin(ctx, "executor-redrive", *cf.timeout)
	if err != nil {
		return err
	}
	defer done()
	js := c.JS
	// A dry run reads the record but makes no bucket.
	recs, err := OpenRecords(rctx, js, !*cf.dryRun)
	if err != nil {
		return err
	}
	r := &redriver{js: js, recs: recs, force: *cf.force, dryRun: *cf.dryRun, out: stdout, quiet: *cf.asJSON}
	if *cf.wait > 0 {
		// One watch for the whole run, however many messages it waits
		// for: a subscription per intent and reads of the stored
		// receipts, no consumer.
		r.receipts = send.NewClient(js).NewListener()
		defer r.receipts.Close()
	}
	var dls []*DeadLetter
	if *cf.all {
		dls, err = List(rctx, js)
	} else {
		var dl *DeadLetter
		if dl, err = Get(rctx, js, *cf.seq); err == nil {
			dls = []*DeadLetter{dl}
		}
	}
	if err == nil {
		err = r.redrive(rctx, dls, !*cf.all)
	}
	if err == nil && *cf.wait > 0 {
		wctx, wcancel := context.WithTimeout(ctx, *cf.wait)
		err = r.waitReceipts(wctx, *cf.wait)
		wcancel()
	}
	if *cf.asJSON {
		printRedriveJSON(stdout, r.items, err)
	} else if err == nil && len(dls) == 0 {
		fmt.Fprintln(stdout, "no dead letters to redrive")
	}
	return err
}

// printRedriveJSON prints the report of --json: the items, and the error
// that stopped the run, if any.
func printRedriveJSON(w io.Writer, items []*ReportItem, err error) {
	rep := Report{Items: items}
	if rep.Items == nil {
		rep.Items = []*ReportItem{}
	}
	if err != nil && !errors.Is(err, cli.ErrSilent) {
		rep.Error = err.Error()
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

func redriveUsage(fs *flag.FlagSet, format string, args ...any) error {
	fs.Usage()
	return fmt.Errorf("%w: %s; nothing published", cli.ErrUsage, fmt.Sprintf(format, args...))
}

// redriver republishes dead letters and reports on each.
type redriver struct {
	js     jetstream.JetStream
	recs   *Records // which dead letters were redriven, and as what
	force  bool
	dryRun bool
	out    io.Writer
	quiet  bool // the report is printed as JSON at the end
	items  []*ReportItem
	sent   []*ReportItem // the republished ones, with their intents
	// receipts watches the intents of the republished messages, from
	// before each is published (nil without --wait).
	receipts *send.Listener
}

func (r *redriver) printf(format string, args ...any) {
	if !r.quiet {
		fmt.Fprintf(r.out, format, args...)
	}
}

// keyScope is the scope a dead letter's envelope names, the default scope
// when it names none.
func keyScope(scope string) string {
	if scope == "" {
		return document.DefaultScope
	}
	return scope
}

func describe(dl *DeadLetter) string {
	intent := dl.IntentID
	if intent == "" {
		intent = "(none)"
	}
	orig := "?"
	if dl.ApprovalSeq != 0 {
		orig = fmt.Sprint(dl.ApprovalSeq)
	}
	return fmt.Sprintf("dead letter %d (approvals message %s, intent %s)", dl.Seq, orig, intent)
}

func seqList(seqs []uint64) string {
	s := make([]string, len(seqs))
	for i, q := range seqs {
		s[i] = fmt.Sprint(q)
	}
	return strings.Join(s, ", ")
}

// redrive republishes each dead letter in dls once. A dead letter already
// redriven is refused when one was asked for by sequence (refuse), skipped
// otherwise, unless forced. Nothing is published when one asked for by
// sequence is refused.
func (r *redriver) redrive(ctx context.Context, dls []*DeadLetter, refuse bool) error {
	done := map[uint64][]uint64{}
	for _, dl := range dls {
		as, err := r.recs.RedrivenAs(ctx, dl)
		if err != nil {
			return err
		}
		done[dl.Seq] = as
	}
	// One message can have several dead letters (a dead letter stored, its
	// receipt not, and the message dead-lettered again later); --all
	// republishes the message once: per APPROVALS sequence, the dead letter
	// redriven before or in this run.
	byMessage := map[uint64]uint64{}
	for _, dl := range dls {
		if len(done[dl.Seq]) > 0 && dl.ApprovalSeq != 0 {
			byMessage[dl.ApprovalSeq] = dl.Seq
		}
	}
	for _, dl := range dls {
		it := &ReportItem{DeadLetterSeq: dl.Seq, ApprovalSeq: dl.ApprovalSeq, IntentID: dl.IntentID, Scope: keyScope(dl.Scope), Reason: dl.Reason, RedrivenAs: done[dl.Seq]}
		if prior := done[dl.Seq]; len(prior) > 0 && !r.force {
			if refuse {
				return fmt.Errorf("%s was already redriven as approvals message %s; nothing published (--force republishes it again)", describe(dl), seqList(prior))
			}
			it.Action = "skipped"
			r.items = append(r.items, it)
			r.printf("skipped: %s was already redriven as approvals message %s\n", describe(dl), seqList(prior))
			continue
		}
		if other, ok := byMessage[dl.ApprovalSeq]; ok && other != dl.Seq && !refuse && !r.force {
			it.Action = "skipped"
			r.items = append(r.items, it)
			r.printf("skipped: %s: dead letter %d of the same message is redriven\n", describe(dl), other)
			continue
		}
		if dl.ApprovalSeq != 0 {
			byMessage[dl.ApprovalSeq] = dl.Seq
		}
		if r.dryRun {
			it.Action = "would_redrive"
			r.items = append(r.items, it)
			r.printf("would redrive: %s, dead-lettered for: %s\n", describe(dl), dl.Reason)
			continue
		}
		if r.receipts != nil {
			if err := r.receipts.WatchKey(dl.Scope, dl.IntentID); err != nil {
				return r.stopped(err)
			}
		}
		sent, err := Redrive(ctx, r.js, r.recs, dl)
		if sent.StreamSeq != 0 { // republished, even if not recorded
			it.Action, it.NewApprovalSeq = "redriven", sent.StreamSeq
			r.items = append(r.items, it)
			r.sent = append(r.sent, it)
			r.printf("redriven: %s as approvals message %d\n", describe(dl), sent.StreamSeq)
		}
		if err != nil {
			return r.stopped(err)
		}
	}
	return nil
}

// stopped is the error of a run stopped by err, saying what was
// republished before.
func (r *redriver) stopped(err error) error {
	if len(r.sent) > 0 {
		return fmt.Errorf("%w; the ones printed above were republished, and a second run skips each one recorded", err)
	}
	return err
}

// waitReceipts waits for the receipt of each republished message and prints
// its outcome; it fails (cli.ErrSilent) unless each came back created or replayed.
func (r *redriver) waitReceipts(ctx context.Context, wait time.Duration) error {
	bad := 0
	for _, it := range r.sent {
		rc, err := r.receipts.Receipt(ctx, send.Sent{Scope: it.Scope, IntentID: it.IntentID, StreamSeq: it.NewApprovalSeq})
		if err != nil {
			bad++
			it.WaitError = err.Error()
			var ended *send.NoReceiptError
			if errors.As(err, &ended) && ctx.Err() != nil {
				it.WaitError = fmt.Sprintf("no receipt within %s", wait)
				if ended.ReadErr != nil {
					it.WaitError += fmt.Sprintf(" (the last read of the stored receipts failed: %v)", ended.ReadErr)
				}
			}
			r.printf("no receipt: approvals message %d (dead letter %d): %s; the executors may still be working on it\n",
				it.NewApprovalSeq, it.DeadLetterSeq, it.WaitError)
			continue
		}
		it.Outcome = string(rc.Outcome)
		task := ""
		if rc.TaskID != "" {
			it.TaskID = &rc.TaskID
			task = ", task " + rc.TaskID
		}
		r.printf("receipt: approvals message %d (dead letter %d): %s%s\n", it.NewApprovalSeq, it.DeadLetterSeq, rc.Outcome, task)
		if rc.Outcome != send.Created && rc.Outcome != send.Replayed {
			bad++
		}
	}
	if bad > 0 {
		r.printf("%d of %d redriven messages did not come back created or replayed\n", bad, len(r.sent))
		return cli.ErrSilent
	}
	return nil
}
