package verify

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Help is verify's usage.
const Help = `verify [--server URL] [--json] [--trusted-approvers FILE [--insecure-allow-unsigned]]
       [--allow-external N] [--allow-repeated-deliveries N]
       [--task-service caldav --caldav-url URL [--caldav-user USER --caldav-password-file FILE]]
       [--task-service redmine --redmine-url URL --redmine-project ID [--redmine-field NAME]
        [--redmine-api-key-file FILE]]

Reads the APPROVALS stream, the receipts, the dead letters, the task service's records and the
executors' intent ledger, and checks that nothing was lost or done twice:
  1. one-terminal-outcome: every approval message has one terminal outcome: a terminal
     receipt or a dead letter, never two that contradict (the service's answer and a dead
     letter or a rejection, a rejection and a dead letter, created and idempotency_conflict);
  2. one-create-per-key: at most one create per key (scope, intent id); its created/replayed
     receipts name its one task, never another key's; a receipt marked task_deleted names a
     key whose task was deleted, and no key is created again after its task was deleted;
  3. counters: creates executed = tasks existing + tasks deleted = keys live + keys compacted;
     every live key names its one task; the scopes' counters add up to the totals;
  4. requests-accounted: requests received = receipts from the service + calls whose reply
     was lost;
  5. first-records-unchanged: no conflict changed a first record;
  6. rejected-not-called: no rejected message reached the service;
  7. calls-name-messages: every service call names a stored approval message with its scope,
     intent id and request digest; calls from outside the executors fail unless allowed
     (--allow-external);
  8. receipts-name-messages: every stored receipt decodes and names a stored approval message
     with its scope and intent id;
  9. gate-passes: every message that reached the service passes the gate, re-run with expiry
     judged at the time the stream stored it;
 10. one-call-per-delivery: each delivery makes at most one call: no delivery number of a
     message carries two calls or exceeds the executors' delivery budget;
 11. one-store: every receipt from the task service names the audited store: another store id
     means a second task service instance, with a store of its own, answered calls;
 12. content-as-approved: every created task holds its approved request's task (title,
     assignee, due date), and the service refused no create for not matching its request;
 13. as-provisioned: the streams and the executors' consumer are as provisioning recorded them
     (the bucket sendtwice-topology, written by executor provision and by serve when it
     provisions): every field that differs is a violation ("stream APPROVALS: max_age:
     expected 168h0m0s, found 2s"); no record at all is one too, and the live configurations
     are then compared with the topology's defaults;
 14. no-foreign-records: every dead letter decodes, and no status message was stored as an
     approval;
 15. ledger-entries-approved: every entry of the executors' intent ledger (bucket
     sendtwice-intents) binds its key to the request digest of an approval the stream holds;
     one no approval stands behind (written from outside the executors' calls: its key's
     approval then ends idempotency_conflict) is named with its key, digest, task, revision
     and when it was written. An entry older than the stream's max age may stand on an
     approval that aged out: counted, not a violation. Entries in the probe's and the demo's
     scopes for keys the pipeline never carried are counted apart. A ledger verify cannot
     read is reported: not applicable, with the reason.
Every stored record is read, whatever its headers: a status message stored in a stream
through a reply subject (or made to look like one), junk, or a document of another schema is
reported with its stream and sequence (receipts-name-messages, no-foreign-records), and every
other check still runs.
Without --trusted-approvers the gate is re-run without signature, expiry and scope (on signed and
unsigned approvals alike); with it, signatures are verified against FILE and unsigned
approvals are refused unless --insecure-allow-unsigned.

The audit covers the messages the APPROVALS stream holds (its window, printed first). Records
of messages that aged out (all older than the stream's max age) are excluded and counted;
records younger than the max age whose message is gone (purged, deleted) are violations. The
max age is the one provisioned, never the stream's current one: a max age lowered since ages
messages out early, and their records are then reported as purged, not excused. The delivery
budget of one-call-per-delivery is the consumer's as provisioned, too.

Keys the task service compacted and records it retired are judged by the lifetime its stats
state. A created/replayed receipt (or a replay on record) whose key is gone is outside the
window, counted and not a violation, once the key's deadline has passed: the approval's
not_after + the APPROVALS max age as provisioned + the service's clock allowance and margin
(for a message the stream no longer holds, the deadline its call carried); before that, or for
an approval that never expires, the key was forgotten while an approval could resend it: a
violation. Request and create records missing from a service with a records retention are
counted as retired when their calls may be older than it (their receipts are then not matched
to calls, their tasks not compared with their requests); missing ones younger than it, or any
missing from a service that keeps records forever, are violations.

Without task service flags, verify audits the service the executors recorded at start (serve
writes which service it calls and where, never a password or an API key, in the bucket
sendtwice-topology, key task-service); with no record, the fake task service. The password or
API key comes from the usual flags or environment, and is sent only to a URL given on the
command line (--caldav-url, --redmine-url), never to one the record names: when it is missing,
or the URL is, verify says which flags to add. Flags that name another service than the
record's are refused, naming both.

With --task-service caldav the task service is a CalDAV collection, which keeps no call log and
no counters: the tasks existing are the VTODOs carrying the intent property, listed with one
REPORT. Checks 2 and 3 are then listed-one-task-per-key: at most one task per key (scope,
intent id), no task id under two keys, at most one created receipt per key, every
created/replayed receipt names the key's task; and listed-tasks-named: every task is named by
a created/replayed receipt (tasks of dead-lettered messages
and of messages before the window are counted apart; those the probe and the demo left, in their
scopes sendtwice-probe and sendtwice-demo, are listed apart and are not the pipeline's, though two
tasks for one key are a violation there too). A task deleted in the calendar since is noted, not
a violation. requests-accounted, first-records-unchanged, calls-name-messages and
one-call-per-delivery need the service's record of every call, content-as-approved the tasks'
content: they are reported as not applicable. The store id of one-store is the collection's:
verify with the URL the executors were given. A 16th check, listed-tasks-proven, names every task
that claims a key without the proof the executors write under the deployment's mark key (kept
in the intent ledger's bucket): a task planted or edited by a user of the service, with where it
is and why; such a task stands for no key in checks 2 and 3. A task made before the mark key
that the intent ledger binds to its key (digest and task) is counted apart until its first
resend proves it. For Redmine the proof is a tagged mark on an issue made by the adapter's own
user.

With --task-service redmine the task service is a Redmine project, audited the same way as a
listed service: the tasks existing are the project's issues, open and closed, that carry a key
in the custom field (--redmine-field); Redmine keeps no call log. Every created/replayed receipt
must name one issue carrying its key; a key with two issues is a violation naming both (the
adapter never hides them, and they are the trace of a lock holder stalled past its lock's
life); an issue carrying a key that no receipt names is reported. The API key comes from
--redmine-api-key-file or $` + service.RedmineAPIKeyEnv + `, and goes only to --redmine-url; verify finds the intent ledger (it holds the
adapter's locks) and never provisions it.

Prints each check with its figures. Exit status 0 when all hold, 1 on any violation.
It only reads; running it changes nothing. Run it once the executors have drained.`

// Config is verify's flags, as given.
type Config struct {
	conn          *cli.ConnConfig
	asJSON        *bool
	timeout       *time.Duration
	trusted       *string
	insecure      *bool
	maxLifetime   *time.Duration
	allowExternal *int
	allowRepeated *int
	tsf           *service.Config
}

// FlagsVar defines verify's flags on fs.
func FlagsVar(fs *flag.FlagSet) *Config {
	conn := cli.ConnFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up reading after this long")
	trusted := fs.String("trusted-approvers", "", "`FILE` of trusted approvers: re-run the gate's signature, expiry and scope checks too")
	insecure := fs.Bool("insecure-allow-unsigned", false, "with --trusted-approvers: accept unsigned approvals, as executors run with this flag do")
	maxLifetime := fs.Duration("max-approval-lifetime", gate.DefaultMaxLifetime, "with --trusted-approvers: refuse signed approvals valid for longer than this, as the executors do")
	allowExternal := fs.Int("allow-external", 0, "accept up to `N` task service calls from outside the executors (with no call reference)")
	allowRepeated := fs.Int("allow-repeated-deliveries", 0, "accept up to `N` calls on a delivery number that already made one\n(only a NATS server that lost consumer state, in a crash or a leader change, numbers a delivery twice)")
	tsf := service.FlagsVar(fs)
	return &Config{conn: conn, asJSON: asJSON, timeout: timeout, trusted: trusted, insecure: insecure, maxLifetime: maxLifetime, allowExternal: allowExternal, allowRepeated: allowRepeated, tsf: tsf}
}

// Run runs verify with its parsed flags.
func Run(ctx context.Context, cf *Config, stdout, stderr io.Writer) error {
	if err := cf.tsf.CheckNamed(); err != nil {
		return err
	}
	opts, err := verifyOptions(*cf.trusted, *cf.insecure, *cf.maxLifetime, *cf.allowExternal, *cf.allowRepeated)
	if err != nil {
		return err
	}
	c, ctx, done, err := cf.conn.OpenWithin(ctx, "executor-verify", *cf.timeout)
	if err != nil {
		return err
	}
	defer done()
	nc, js := c.NC, c.JS
	if _, _, err := service.Settle(ctx, js, cf.tsf, "verify", cli.RedactURL(cf.conn.Server), stderr); err != nil {
		return err
	}
	var lister taskservice.Lister
	// The gate's re-run checks each message's destination against what the
	// audited service serves, as its executors' gates did.
	serves := []gate.Destination{executor.FakeDefault}
	if cf.tsf.Kind != service.KindFake {
		svc, err := cf.tsf.OpenToList(ctx, nc, *cf.timeout)
		if err != nil {
			return err
		}
		if lister = svc.Lister; lister == nil {
			return fmt.Errorf("verify: the task service %s cannot list its tasks", svc.Name)
		}
		serves = svc.Serves
	}
	in, err := audit.LoadWith(ctx, nc, lister)
	if err != nil {
		return err
	}
	opts.Serves = serves
	return writeReport(stdout, audit.VerifyWith(in, opts), *cf.asJSON)
}

// verifyOptions checks verify's flags for the audit and makes its Options:
// with trusted approvers, the gate's re-run verifies signatures too.
func verifyOptions(trusted string, insecure bool, maxLifetime time.Duration, allowExternal, allowRepeated int) (audit.Options, error) {
	if allowExternal < 0 || allowRepeated < 0 {
		return audit.Options{}, fmt.Errorf("%w: --allow-external and --allow-repeated-deliveries must not be negative", cli.ErrUsage)
	}
	if insecure && trusted == "" {
		return audit.Options{}, fmt.Errorf("%w: --insecure-allow-unsigned needs --trusted-approvers (without it, no signature is checked at all)", cli.ErrUsage)
	}
	if maxLifetime <= 0 {
		return audit.Options{}, fmt.Errorf("%w: --max-approval-lifetime must be positive", cli.ErrUsage)
	}
	opts := audit.Options{AllowExternal: allowExternal, AllowRepeatedDeliveries: allowRepeated}
	if trusted != "" {
		keys, err := sign.LoadTrusted(trusted)
		if err != nil {
			return audit.Options{}, err
		}
		opts.Gate = &gate.Checker{Keys: keys, AllowUnsigned: insecure, MaxLifetime: maxLifetime}
	}
	return opts, nil
}

// writeReport prints rep, as text or as JSON, and fails when a check
// failed.
func writeReport(stdout io.Writer, rep audit.Report, asJSON bool) error {
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		PrintReport(stdout, rep)
	}
	if !rep.OK {
		return fmt.Errorf("verify: a check failed: %w", cli.ErrSilent)
	}
	return nil
}

func PrintReport(w io.Writer, rep audit.Report) {
	win := rep.Window
	if win.Stream != "" {
		held := fmt.Sprintf("sequences %d to %d", win.FirstSeq, win.LastSeq)
		if win.Messages == 0 {
			held = fmt.Sprintf("no messages (next sequence %d)", win.LastSeq+1)
		}
		maxAge := win.MaxAge
		if win.MaxAgeFrom != "" {
			maxAge += " (" + win.MaxAgeFrom + ")"
		}
		fmt.Fprintf(w, "window: %s %s, %d messages; max age %s; audited at %s\n", win.Stream, held, win.Messages, maxAge, win.AuditedAt)
		if b := win.BeforeWindow; b.Messages > 0 {
			fmt.Fprintf(w, "        before the window (aged out before %s, excluded): %d messages, %d service calls, %d receipts\n",
				win.Since, b.Messages, b.Calls, b.Receipts)
		}
		if a := win.AfterWindow; a.Messages > 0 {
			fmt.Fprintf(w, "        after the window (stored while verify read, excluded): %d messages, %d service calls, %d receipts\n",
				a.Messages, a.Calls, a.Receipts)
		}
	}
	if id := rep.Service; id.StoreID != "" && id.Name != "" {
		fmt.Fprintf(w, "task service: store %s, %s\n", id.StoreID, id.Name)
	} else if id.StoreID != "" {
		fmt.Fprintf(w, "task service: store %s, answered by instance %s on %s (pid %d)\n", id.StoreID, id.Instance, id.Host, id.PID)
	}
	if l := rep.Listing; l != nil {
		fmt.Fprintf(w, "tasks:        %s\n", l)
	}
	if len(rep.Gate.Checks) > 0 {
		fmt.Fprintf(w, "gate re-run: %s", strings.Join(rep.Gate.Checks, ", "))
		if len(rep.Gate.NotChecked) > 0 {
			fmt.Fprintf(w, " (not %s)", strings.Join(rep.Gate.NotChecked, ", "))
		}
		fmt.Fprintf(w, "\n        %s\n", rep.Gate.Note)
	}
	for _, c := range rep.Checks {
		mark := "ok  "
		switch {
		case !c.OK:
			mark = "FAIL"
		case c.NotApplicable != "":
			mark = "n/a "
		}
		fmt.Fprintf(w, "%s %d. %s: %s\n", mark, c.N, c.ID, c.Name)
		if c.NotApplicable != "" {
			fmt.Fprintf(w, "       not applicable: %s\n", c.NotApplicable)
		}
		for _, f := range c.Figures {
			fmt.Fprintf(w, "       %-60s %d\n", f.Name, f.Value)
		}
		for _, v := range c.Violations {
			fmt.Fprintf(w, "       ! %s\n", v)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(w, "       - %s\n", n)
		}
	}
	if rep.OK {
		fmt.Fprintln(w, "verify: all checks hold")
	} else {
		fmt.Fprintln(w, "verify: VIOLATIONS FOUND")
	}
}
