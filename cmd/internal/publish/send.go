package publish

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

// SendHelp is send's usage.
const SendHelp = `send (--candidate F --request F --approval F | --envelope FILE) [--server URL]
     [--wait DURATION] [--json] [--trusted-approvers FILE] [--no-check]

Runs the gate locally (nothing is published if it fails; signature, expiry and scope too with
--trusted-approvers or $SENDTWICE_TRUSTED_APPROVERS, else they are left to the executors and
a note says so on standard error), then publishes the three documents as one
task-envelope.v1 onto the APPROVALS stream. With --envelope instead, it publishes a stored
task-envelope.v1 message (a file of one, as sent before), byte for byte, after the same local
gate. Each invocation is a real send: sending the same approval twice reaches the task
service twice, and the second receipt says replayed, with the first task.
With --wait, waits for the receipt of this invocation's own message and prints it
(readable, or the task-receipt.v1 document with --json). With tracing on
($OTEL_EXPORTER_OTLP_ENDPOINT set), the publish starts a trace and its id is printed too.

Exit status: 0 created or replayed (or published, without --wait); 1 error or local gate
failure; 2 usage; 3 idempotency_conflict; 4 rejected; 5 dead_lettered (its reason says which:
deliveries ran out, whether the task was created is unknown, and sending again is safe and
will say; or the task service refused the call for good, and sending again is refused the same
way until the cause is fixed); 6 published, but no receipt (none
within --wait, the connection lost, the receipts unreadable; the message stays stored, an
executor may still carry it out, and sending again is safe).`

// SendConfig is send's flags, as given.
type SendConfig struct {
	fs       *flag.FlagSet
	docFlags documentFiles
	envelope *string
	conn     *cli.ConnConfig
	wait     *time.Duration
	asJSON   *bool
	noCheck  *bool
	trusted  *string
}

// SendFlagsVar defines send's flags on fs.
func SendFlagsVar(fs *flag.FlagSet) *SendConfig {
	docFlags := documentFlags(fs)
	envelope := fs.String("envelope", "", "send the stored task-envelope.v1 `FILE` instead of the three documents")
	conn := cli.ConnFlags(fs)
	wait := fs.Duration("wait", 0, "wait up to `DURATION` for this message's receipt (e.g. 30s); 0 does not wait")
	asJSON := fs.Bool("json", false, "print the receipt as the task-receipt.v1 JSON document")
	noCheck := fs.Bool("no-check", false, "skip the local gate, to send a bad message on purpose")
	trusted := trustedApproversFlag(fs)
	return &SendConfig{fs: fs, docFlags: docFlags, envelope: envelope, conn: conn, wait: wait, asJSON: asJSON, noCheck: noCheck, trusted: trusted}
}

// Send runs send with its parsed flags.
func Send(ctx context.Context, cf *SendConfig, stdout, stderr io.Writer) error {
	msg, err := cf.message()
	if err != nil {
		return err
	}
	if !*cf.noCheck {
		check, withKeys, err := localCheck(*cf.trusted)
		if err != nil {
			return fmt.Errorf("nothing published: %w", err)
		}
		if err := msg.check(check); err != nil {
			return fmt.Errorf("nothing published: %w", err)
		}
		if !withKeys {
			fmt.Fprintf(stderr, "publisher: local gate passed (%s)\n", NotChecked)
		}
	}
	env, err := msg.envelope()
	if err != nil {
		return fmt.Errorf("nothing published: %w", err)
	}
	return sendEnvelope(ctx, cf.conn, env, *cf.wait, *cf.asJSON, stdout)
}

// outgoing is the message send publishes, in either form: a stored
// envelope, or else the three documents.
type outgoing struct {
	stored *send.Envelope
	docs   send.Documents
}

// check runs the local gate on the message as it was given.
func (o outgoing) check(c send.Check) error {
	var err error
	if o.stored != nil {
		_, err = c.Envelope(o.stored)
	} else {
		_, err = c.Documents(o.docs)
	}
	return err
}

// envelope is the message to publish: the stored envelope, or the three
// documents laid in one.
func (o outgoing) envelope() (*send.Envelope, error) {
	if o.stored != nil {
		return o.stored, nil
	}
	return send.Build(o.docs)
}

// message reads the message send publishes: the three documents, or a
// stored envelope (--envelope); exactly one of the two.
func (cf *SendConfig) message() (outgoing, error) {
	d := cf.docFlags
	documentsGiven := *d.candidate != "" || *d.request != "" || *d.approval != ""
	switch {
	case cf.fs.NArg() != 0:
		return outgoing{}, cli.UsageError(cf.fs, "unexpected argument %q", cf.fs.Arg(0))
	case *cf.envelope != "" && documentsGiven:
		return outgoing{}, cli.UsageError(cf.fs, "--envelope and --candidate/--request/--approval exclude each other: send a stored envelope or the three documents, not both")
	case *cf.envelope == "" && !documentsGiven:
		return outgoing{}, cli.UsageError(cf.fs, "nothing to send: give --candidate FILE, --request FILE and --approval FILE, or --envelope FILE")
	case *cf.envelope != "":
		data, err := os.ReadFile(*cf.envelope)
		if err != nil {
			return outgoing{}, fmt.Errorf("nothing published: reading the envelope: %w", err)
		}
		env, err := send.ParseEnvelope(data)
		if err != nil {
			return outgoing{}, fmt.Errorf("nothing published: %s: %w", *cf.envelope, err)
		}
		return outgoing{stored: env}, nil
	}
	files, err := readDocuments(cf.fs, d)
	if err != nil {
		return outgoing{}, err
	}
	return outgoing{docs: send.Documents{Candidate: files["candidate"], Request: files["request"], Approval: files["approval"]}}, nil
}

// sendEnvelope publishes env and, with a wait, prints its receipt.
func sendEnvelope(ctx context.Context, conn *cli.ConnConfig, env *send.Envelope, wait time.Duration, asJSON bool, stdout io.Writer) error {
	c, err := conn.Open("publisher", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	js := c.JS
	client := send.NewClient(js)
	var listen *send.Listener
	if wait > 0 {
		// Listen before publishing, so that the receipt is not missed
		// however soon it comes.
		if listen, err = client.Listen(env); err != nil {
			return fmt.Errorf("nothing published: %w", err)
		}
		defer listen.Close()
	}
	sent, err := client.Publish(ctx, env, send.Timeout(30*time.Second))
	if err != nil {
		return err
	}
	if wait <= 0 {
		printPublished(stdout, sent, asJSON)
		return nil
	}
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	r, err := listen.Receipt(wctx, sent)
	if err != nil {
		// Published: whatever ended the wait, the message is stored and
		// an executor may still carry it out.
		return cli.PublishedNoReceipt(ctx, sent, wait, err)
	}
	if asJSON {
		fmt.Fprintf(stdout, "%s\n", r.Raw)
	} else {
		PrintReceipt(stdout, r)
		printTrace(stdout, sent)
	}
	switch r.Outcome {
	case send.Created, send.Replayed:
		return nil
	case send.Conflict:
		return &cli.ExitError{Code: ExitConflict, Err: cli.ErrSilent}
	case send.Rejected:
		return &cli.ExitError{Code: ExitRejected, Err: cli.ErrSilent}
	default:
		return &cli.ExitError{Code: ExitDead, Err: cli.ErrSilent}
	}
}

// printPublished says that sent was published, without waiting for its
// receipt: readable, or as one JSON object with --json.
func printPublished(w io.Writer, sent send.Sent, asJSON bool) {
	if !asJSON {
		fmt.Fprintf(w, "published: stream message %d on %s\n", sent.StreamSeq, sent.Subject)
		printTrace(w, sent)
		return
	}
	trace := ""
	if sent.TraceID != "" {
		trace = fmt.Sprintf(`,"trace_id":%q`, sent.TraceID)
	}
	fmt.Fprintf(w, `{"published":true,"stream_seq":%d,"subject":%q%s}`+"\n", sent.StreamSeq, sent.Subject, trace)
}

// printTrace names the trace of a traced publish, under what was printed
// about it; it prints nothing for one that was not traced.
func printTrace(w io.Writer, sent send.Sent) {
	if sent.TraceID != "" {
		fmt.Fprintf(w, "  trace %s\n", sent.TraceID)
	}
}

// deadLetteredAdvice tells what a dead_lettered receipt means for the
// sender: an attempt may have reached the task service before its reply was
// lost, so the outcome is unknown; a resend is keyed by the same intent id
// and answers created or replayed, never a second task.
const deadLetteredAdvice = "whether the task was created is unknown; sending the same approval again is safe and will say: " +
	"created, or replayed if an earlier attempt reached the task service (nothing is created twice)"

// orElse returns s, or unknown for a member the receipt leaves null.
func orElse(s, unknown string) string {
	if s == "" {
		return unknown
	}
	return s
}

// PrintReceipt writes a receipt for a person. An intent outside the default
// scope is named with its scope ("intent-0001 in scope team-a").
func PrintReceipt(w io.Writer, r *send.Receipt) {
	intent := orElse(r.IntentID, "(unknown)")
	if r.Scope != "" && r.Scope != document.DefaultScope {
		intent += " in scope " + r.Scope
	}
	switch r.Outcome {
	case send.Created:
		fmt.Fprintf(w, "created: task %s for intent %s\n", orElse(r.TaskID, "?"), intent)
	case send.Replayed:
		if r.TaskDeleted {
			fmt.Fprintf(w, "replayed: the same task %s for intent %s (the task was deleted since); nothing was created again\n", orElse(r.TaskID, "?"), intent)
		} else {
			fmt.Fprintf(w, "replayed: the same task %s for intent %s; nothing new was created\n", orElse(r.TaskID, "?"), intent)
		}
	case send.Conflict:
		fmt.Fprintf(w, "idempotency_conflict: intent %s already created task %s from different content; nothing was created or changed\n", intent, orElse(r.TaskID, "?"))
	case send.Rejected:
		fmt.Fprintf(w, "rejected at %s (%s): %s\n", r.Rejection.Check, r.Rejection.Path, r.Rejection.Reason)
	case send.DeadLettered:
		fmt.Fprintf(w, "dead_lettered after %d attempt(s): %s\n", r.Failure.Attempts, r.Failure.Reason)
		if r.Failure.OutcomeUnknown() {
			fmt.Fprintf(w, "  %s\n", deadLetteredAdvice)
		}
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  the task service says: %s\n", r.Note)
	}
	if r.Counts != nil {
		fmt.Fprintf(w, "  requests received %d, creates executed %d, tasks existing %d\n",
			r.Counts.RequestsReceived, r.Counts.CreatesExecuted, r.Counts.TasksExisting)
	}
	fmt.Fprintf(w, "  stream message %d, delivery %d, executor %s\n", r.Delivery.StreamSeq, r.Delivery.Delivered, r.Delivery.Executor)
}

// The exit statuses of a receipt that says no task was made or kept.
const (
	ExitConflict = 3 // receipt: idempotency_conflict
	ExitRejected = 4 // receipt: rejected at the executor's gate
	ExitDead     = 5 // receipt: dead_lettered
)
