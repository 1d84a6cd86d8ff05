// Command executor consumes approved requests: it runs the gate, calls the
// task service keyed by the intent id through one contract (taskservice),
// whichever service it is (the fake over NATS, CalDAV or Redmine), and
// publishes receipts. It can also run everything in one process (serve
// --embedded), show status, send a stored envelope and wait for its receipt
// (send), play the whole story (demo), and list a CalDAV account's calendars
// that accept tasks (calendars).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	cli.Main("executor", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}

const usage = `executor: consume approved requests, gate them, call the task service, publish receipts

Usage:
  executor serve [--server URL | --embedded] (--trusted-approvers FILE | --insecure-allow-unsigned)
                 [--data DIR] [--listen HOST:PORT] [--concurrency N] [--task-service SERVICE]
  executor status [--server URL] [--json] [--service-timeout DURATION] [--task-service SERVICE]
  executor verify [--server URL] [--json] [--trusted-approvers FILE] [--allow-external N]
                  [--task-service SERVICE]
  executor redrive (--seq N | --all) [--server URL] [--wait DURATION] [--force] [--dry-run] [--json]
  executor provision [--server URL] [--replicas N]
  executor probe [--server URL | --embedded] [--task-service SERVICE] [--concurrency N] [--json]
                 [--keep-tasks] --yes
  executor send --envelope FILE [--server URL] [--wait DURATION] [--json]
  executor calendars --caldav-url URL [--caldav-user USER] [--caldav-password-file FILE]
                     [--caldav-ca-file FILE] [--all] [--json]
  executor demo [--verbose] [--keep DIR] [--task-service caldav --caldav-url URL] [--keep-tasks]
  executor --version

Run 'executor COMMAND --help' for a command's flags. SERVICE is fake (the default: the task
service over NATS), caldav (with --caldav-url URL and, for a login, --caldav-user USER and
--caldav-password-file FILE or $CALDAV_PASSWORD) or redmine (with --redmine-url URL,
--redmine-project ID, --redmine-api-key-file FILE or $REDMINE_API_KEY, and optionally
--redmine-field NAME and --redmine-lock-ttl DURATION; its locks need NATS).
status and verify, given no SERVICE, use the one serve recorded (never its password or key).
The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
`

// errSilent marks a failure whose explanation was already printed.
var errSilent = cli.ErrSilent

// errUsage marks bad flags or arguments (exit status 2).
var errUsage = cli.ErrUsage

func exitCode(err error) int { return cli.ExitCode(err) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command", errUsage)
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "verify":
		return runVerify(ctx, args[1:], stdout, stderr)
	case "redrive":
		return runRedrive(ctx, args[1:], stdout, stderr)
	case "provision":
		return runProvision(ctx, args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "calendars":
		return runCalendars(ctx, args[1:], stdout, stderr)
	case sendCommand:
		return runSend(ctx, args[1:], stdout, stderr)
	}
	if cli.HelpOrVersion("executor", usage, args[0], stdout) {
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, help string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlagSet(name, "Usage: executor "+help+"\n\n", stderr)
}

func parse(fs *flag.FlagSet, args []string) error { return cli.ParseNoArgs(fs, args) }
