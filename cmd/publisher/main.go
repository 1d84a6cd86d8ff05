// Command publisher makes approvals and publishes approved requests: it
// digests documents, writes approvals, runs the gate locally, sends envelopes
// onto the APPROVALS stream and waits for their receipts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

const usage = `publisher: make approvals and publish approved requests

Usage:
  publisher digest [--canonical] FILE|-
  publisher approve --candidate F --request F --by NAME [--id ID] [-o FILE]
  publisher check --candidate F --request F --approval F [--json]
  publisher send --candidate F --request F --approval F [--server URL] [--wait DURATION] [--json]
  publisher keygen --name NAME [--dir DIR] [--trusted FILE]
  publisher console [--listen HOST:PORT] [--candidates DIR] [--key FILE] [--server URL] [--by NAME]
  publisher bench [--server URL | --embedded] ...
  publisher --version

Run 'publisher COMMAND --help' for a command's flags.
The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
`

// exitError carries a process exit status with its cause.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit statuses.
const (
	exitOK       = 0
	exitFailure  = 1 // an error, or a gate check failed
	exitUsage    = 2 // bad flags or arguments
	exitConflict = 3 // receipt: idempotency_conflict
	exitRejected = 4 // receipt: rejected at the executor's gate
	exitDead     = 5 // receipt: dead_lettered
	exitNoAnswer = 6 // --wait ran out before a receipt arrived
)

var errUsage = errors.New("usage")

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && !errors.Is(ee.err, errSilent) {
			fmt.Fprintln(stderr, "publisher:", ee.err)
		}
		return ee.code
	}
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	fmt.Fprintln(stderr, "publisher:", err)
	return exitFailure
}

// errSilent marks a failure whose explanation was already printed.
var errSilent = errors.New("already reported")

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{exitUsage, errSilent}
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
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "console":
		return runConsole(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "publisher", cli.Version())
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{exitUsage, fmt.Errorf("unknown command %q", args[0])}
}
