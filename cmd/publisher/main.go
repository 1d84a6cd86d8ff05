// Command publisher makes approvals and publishes approved requests: it
// writes task requests, digests documents, writes approvals, runs the gate
// locally, sends envelopes onto the APPROVALS stream and waits for their
// receipts.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/console"
)

func main() {
	cli.Main("publisher", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	})
}

const usage = `publisher: make approvals and publish approved requests

Usage:
  publisher request --intent ID --title TEXT [--assignee REF] [--due DATE] [--scope SCOPE]
                    [--provider fake|caldav|redmine] [--destination NAME] [--out DIR] [--force]
  publisher digest [--canonical] FILE|-
  publisher approve --candidate F --request F (--key FILE | --by NAME) [--id ID] [-o FILE]
  publisher check --candidate F --request F --approval F [--json]
  publisher send (--candidate F --request F --approval F | --envelope FILE) [--server URL]
                 [--wait DURATION] [--json]
  publisher keygen --name NAME [--dir DIR] [--trusted FILE] [--scope SCOPE]...
  publisher trust --trusted FILE --name NAME (--scope SCOPE... | --default-scope-only)
  publisher console [--listen HOST:PORT] [--candidates DIR] [--key FILE] [--server URL] [--by NAME]
  publisher --version

Run 'publisher COMMAND --help' for a command's flags.
The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
Traces go to $OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP) when it is set; the OTEL_* variables apply
(docs/TRACING.md).
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
	rest := args[1:]
	switch args[0] {
	case "request":
		return command(rest, stderr, "request", publish.RequestHelp, publish.RequestFlagsVar,
			func(c *publish.RequestConfig) error { return publish.Request(c, stdout) })
	case "digest":
		return command(rest, stderr, "digest", publish.DigestHelp, publish.DigestFlagsVar,
			func(c *publish.DigestConfig) error { return publish.Digest(c, stdin, stdout) })
	case "approve":
		return command(rest, stderr, "approve", publish.ApproveHelp, publish.ApproveFlagsVar,
			func(c *publish.ApproveConfig) error { return publish.Approve(c, stdout, stderr) })
	case "check":
		return command(rest, stderr, "check", publish.CheckHelp, publish.CheckFlagsVar,
			func(c *publish.CheckConfig) error { return publish.Check(c, stdout) })
	case "send":
		return command(rest, stderr, "send", publish.SendHelp, publish.SendFlagsVar,
			func(c *publish.SendConfig) error { return publish.Send(ctx, c, stdout, stderr) })
	case "keygen":
		return command(rest, stderr, "keygen", publish.KeygenHelp, publish.KeygenFlagsVar,
			func(c *publish.KeygenConfig) error { return publish.Keygen(c, stdout) })
	case "trust":
		return command(rest, stderr, "trust", publish.TrustHelp, publish.TrustFlagsVar,
			func(c *publish.TrustConfig) error { return publish.Trust(c, stdout) })
	case "console":
		return runConsole(ctx, rest, stdout, stderr)
	}
	if cli.HelpOrVersion("publisher", usage, args[0], stdout) {
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{Code: exitUsage, Err: fmt.Errorf("unknown command %q", args[0])}
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return command(args, stderr, "console", console.CommandHelp, console.FlagsVar,
		func(f *console.Flags) error { return console.Run(ctx, f, stdout, stderr) })
}

// command runs a command whose flags a package defines: flagsVar defines
// them on a flag set of the command's own, and run runs the command with
// what they hold once args are parsed (--help is success).
func command[C any](args []string, stderr io.Writer, name, help string, flagsVar func(*flag.FlagSet) C, run func(C) error) error {
	fs := newFlagSet(name, help, stderr)
	cfg := flagsVar(fs)
	if help, err := cli.ParseOrHelp(fs, args); help || err != nil {
		return err
	}
	return run(cfg)
}

// newFlagSet returns a flag set that reports errors instead of exiting, with
// a usage text of its own.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlagSet(name, "Usage: publisher "+synopsis+"\n\n", stderr)
}
