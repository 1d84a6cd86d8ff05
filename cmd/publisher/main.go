// Command publisher makes approvals and publishes approved requests: it
// digests documents, writes approvals, runs the gate locally, sends envelopes
// onto the APPROVALS stream and waits for their receipts.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/publish"
)

func main() {
	cli.Main("publisher", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	})
}

const usage = `publisher: make approvals and publish approved requests

Usage:
  publisher digest [--canonical] FILE|-
  publisher approve --candidate F --request F --by NAME [--id ID] [-o FILE]
  publisher check --candidate F --request F --approval F [--json]
  publisher send --candidate F --request F --approval F [--server URL] [--wait DURATION] [--json]
  publisher keygen --name NAME [--dir DIR] [--trusted FILE] [--scope SCOPE]...
  publisher trust --trusted FILE --name NAME (--scope SCOPE... | --default-scope-only)
  publisher console [--listen HOST:PORT] [--candidates DIR] [--key FILE] [--server URL] [--by NAME]
  publisher --version

Run 'publisher COMMAND --help' for a command's flags.
The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
`

// exitError carries a process exit status with its cause.
type exitError = cli.ExitError

// Exit statuses.
const (
	exitOK       = cli.ExitOK
	exitFailure  = cli.ExitFailure      // an error, or a gate check failed
	exitUsage    = cli.ExitUsage        // bad flags or arguments
	exitConflict = publish.ExitConflict // receipt: idempotency_conflict
	exitRejected = publish.ExitRejected // receipt: rejected at the executor's gate
	exitDead     = publish.ExitDead     // receipt: dead_lettered
	exitNoAnswer = cli.ExitNoReceipt    // published, but no receipt (--wait ran out, or the wait failed)
)

// exitCode reports err on stderr, unless already reported, and returns the
// exit status.
func exitCode(err error, stderr io.Writer) int { return cli.Report("publisher", err, stderr) }

// errSilent marks a failure whose explanation was already printed.
var errSilent = cli.ErrSilent

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{Code: exitUsage, Err: errSilent}
	}
	switch args[0] {
	case "digest":
		return runDigest(args[1:], stdin, stdout, stderr)
	case "approve":
		return runApprove(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "send":
		return runSend(ctx, args[1:], stdout, stderr)
	case "keygen":
		return runKeygen(args[1:], stdout, stderr)
	case "trust":
		return runTrust(args[1:], stdout, stderr)
	case "console":
		return runConsole(ctx, args[1:], stdout, stderr)
	}
	if cli.HelpOrVersion("publisher", usage, args[0], stdout) {
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{Code: exitUsage, Err: fmt.Errorf("unknown command %q", args[0])}
}
