package publish

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

// SendStoredHelp is send's usage.
const SendStoredHelp = `send --envelope FILE [--server URL] [--wait DURATION] [--json]

Publishes one stored task-envelope.v1 message (the file, byte for byte) onto the APPROVALS
stream and waits for the receipt of this invocation's own message, through the public send
package. Each invocation is a real send: the same envelope sent twice reaches the task service
twice, and the second receipt says replayed, with the first task. No local gate runs: the
executors' gate judges the message and its receipt says what it decided (to send three
documents with a local check first, use publisher send). The demo's publisher processes are
this command.

Prints the receipt, or with --json the task-receipt.v1 document.

Exit status: 0 a receipt arrived, whatever its outcome; 1 error (nothing published, or not for
certain); 2 usage; 6 published, but no receipt (none within --wait, the connection lost, the
receipts unreadable; the message stays stored, an executor may still carry it out, and sending
again is safe).`

// SendStoredConfig is send's flags, as given.
type SendStoredConfig struct {
	fs     *flag.FlagSet
	file   *string
	conn   *cli.ConnConfig
	wait   *time.Duration
	asJSON *bool
}

// SendStoredFlagsVar defines send's flags on fs.
func SendStoredFlagsVar(fs *flag.FlagSet) *SendStoredConfig {
	file := fs.String("envelope", "", "the task-envelope.v1 `FILE` to publish")
	conn := cli.ConnFlags(fs)
	wait := fs.Duration("wait", 30*time.Second, "wait up to `DURATION` for the receipt")
	asJSON := fs.Bool("json", false, "print the receipt as the task-receipt.v1 JSON document")
	return &SendStoredConfig{fs: fs, file: file, conn: conn, wait: wait, asJSON: asJSON}
}

// SendStored runs send with its parsed flags.
func SendStored(ctx context.Context, cf *SendStoredConfig, stdout io.Writer) error {
	switch {
	case *cf.file == "":
		cf.fs.Usage()
		return fmt.Errorf("%w: --envelope is required", cli.ErrUsage)
	case *cf.wait <= 0:
		cf.fs.Usage()
		return fmt.Errorf("%w: --wait must be positive", cli.ErrUsage)
	}
	data, err := os.ReadFile(*cf.file)
	if err != nil {
		return fmt.Errorf("nothing published: %w", err)
	}
	env, err := send.ParseEnvelope(data)
	if err != nil {
		return fmt.Errorf("nothing published: %s: %w", *cf.file, err)
	}
	c, err := cf.conn.Open("executor-send", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	js := c.JS
	wctx, cancel := context.WithTimeout(ctx, *cf.wait)
	defer cancel()
	sent, r, err := send.NewClient(js).Send(wctx, env)
	switch {
	case errors.Is(err, send.ErrNoReceipt):
		// Published: whatever ended the wait, the message is stored.
		return cli.PublishedNoReceipt(ctx, sent, *cf.wait, err)
	case err != nil:
		return err
	}
	if *cf.asJSON {
		_, err = fmt.Fprintf(stdout, "%s\n", r.Raw)
		return err
	}
	PrintSentReceipt(stdout, sent, r)
	return nil
}

// PrintSentReceipt writes a receipt for a person, one line. An intent
// outside the default scope is named with its scope.
func PrintSentReceipt(w io.Writer, sent send.Sent, r *send.Receipt) {
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	intent := orNone(r.IntentID)
	if r.Scope != "" && r.Scope != document.DefaultScope {
		intent += " in scope " + r.Scope
	}
	fmt.Fprintf(w, "%s: task %s, intent %s, stream message %d, delivery %d", r.Outcome, orNone(r.TaskID),
		intent, sent.StreamSeq, r.Delivery.Delivered)
	switch {
	case r.TaskDeleted:
		fmt.Fprint(w, "; the task was deleted since, nothing was created again")
	case r.Rejection != nil:
		fmt.Fprintf(w, "; rejected at %s (%s): %s", r.Rejection.Check, r.Rejection.Path, r.Rejection.Reason)
	case r.Failure != nil:
		fmt.Fprintf(w, "; after %d attempts: %s", r.Failure.Attempts, r.Failure.Reason)
	}
	if c := r.Counts; c != nil {
		fmt.Fprintf(w, "; requests received %d, creates executed %d, tasks existing %d", c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
	}
	fmt.Fprintln(w)
}
