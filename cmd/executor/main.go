// Command executor consumes approved requests: it runs the gate, calls the
// task service keyed by the intent id through one contract (taskservice),
// whichever service it is (the fake over NATS, CalDAV or Redmine), and
// publishes receipts. It can also run everything in one process (serve
// --embedded), show status, play the whole story (demo), and list a CalDAV
// account's calendars that accept tasks (calendars).
//
// The demo sends its first approval from two separate OS processes: it runs
// this executable again with $SENDTWICE_DEMO_SENDER=1, which main reads
// before anything else, and then the process is publisher send (package
// publish, the same code and flags as the publisher's), not the executor.
// It is no command of the executor's.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/cmd/internal/verify"
	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	if os.Getenv(demoSenderEnv) == "1" {
		cli.Main("publisher", func(ctx context.Context) error {
			return sendAsPublisher(ctx, os.Args[1:], os.Stdout, os.Stderr)
		})
		return
	}
	cli.Main("executor", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}

// demoSenderEnv, set to 1, makes this executable one of the demo's
// publisher processes (see the package comment).
const demoSenderEnv = "SENDTWICE_DEMO_SENDER"

// sendAsPublisher is publisher send, with its flags.
func sendAsPublisher(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("send", "Usage: publisher "+publish.SendHelp+"\n\n", stderr)
	cfg := publish.SendFlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return publish.Send(ctx, cfg, stdout, stderr)
}

const usage = `executor: consume approved requests, gate them, call the task service, publish receipts

Usage:
  executor serve [--config FILE] [--server URL | --embedded] (--trusted-approvers FILE | --insecure-allow-unsigned)
                 [--data DIR] [--listen HOST:PORT] [--concurrency N] [--task-service SERVICE]
  executor status [--server URL] [--json] [--service-timeout DURATION] [--task-service SERVICE]
  executor verify [--server URL] [--json] [--trusted-approvers FILE] [--allow-external N]
                  [--task-service SERVICE]
  executor redrive (--seq N | --all) [--server URL] [--wait DURATION] [--force] [--dry-run] [--json]
  executor provision [--server URL] [--replicas N]
  executor probe [--server URL | --embedded] [--task-service SERVICE] [--concurrency N] [--json]
                 [--keep-tasks] --yes
  executor calendars --caldav-server URL [--caldav-user USER] [--caldav-password-file FILE]
                     [--caldav-ca-file FILE] [--all] [--json]
  executor demo [--verbose] [--keep DIR] [--task-service caldav --caldav-url URL] [--keep-tasks]
  executor --version

Run 'executor COMMAND --help' for a command's flags. SERVICE is fake (the default: the task
service over NATS), caldav (with --caldav-url URL and, for a login, --caldav-user USER and
--caldav-password-file FILE or $CALDAV_PASSWORD) or redmine (with --redmine-url URL,
--redmine-project ID, --redmine-api-key-file FILE or $REDMINE_API_KEY, and optionally
--redmine-field NAME, --redmine-lock-ttl DURATION and --redmine-request-lifetime DURATION;
its locks need NATS).
status and verify, given no SERVICE, use the one serve recorded (never its password or key).
The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
Traces go to $OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP) when it is set; the OTEL_* variables apply
(docs/TRACING.md).
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
	rest := args[1:]
	switch args[0] {
	case "serve":
		return runServe(ctx, rest, stderr)
	case "status":
		return command(rest, stderr, "status", service.StatusHelp, service.StatusFlagsVar,
			func(c *service.StatusConfig) error { return service.Status(ctx, c, stdout, stderr) })
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "verify":
		return command(rest, stderr, "verify", verify.Help, verify.FlagsVar,
			func(c *verify.Config) error { return verify.Run(ctx, c, stdout, stderr) })
	case "redrive":
		return command(rest, stderr, "redrive", redrive.Help, redrive.FlagsVar,
			func(c *redrive.Config) error { return redrive.Run(ctx, c, stdout) })
	case "provision":
		return command(rest, stderr, "provision", serve.ProvisionHelp, serve.ProvisionFlagsVar,
			func(c *serve.ProvisionConfig) error { return serve.Provision(ctx, c, stdout, stderr) })
	case "probe":
		return command(rest, stderr, "probe", service.ProbeHelp, service.ProbeFlagsVar,
			func(c *service.ProbeConfig) error { return service.Probe(ctx, c, stdout, stderr) })
	case "calendars":
		return command(rest, stderr, "calendars", service.CalendarsHelp, service.CalendarsFlagsVar,
			func(c *service.CalendarsConfig) error { return service.Calendars(ctx, c, stdout) })
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

// command runs a command whose flags a package defines: flagsVar defines
// them on a flag set of the command's own, and run runs the command with
// what they hold once args are parsed.
func command[C any](args []string, stderr io.Writer, name, help string, flagsVar func(*flag.FlagSet) C, run func(C) error) error {
	fs := newFlagSet(name, help, stderr)
	cfg := flagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return run(cfg)
}

// serveFlags is serve's flag set and the configuration it fills in.
type serveFlags struct {
	fs  *flag.FlagSet
	cfg *serve.Config
}

// serveKnobFlags, when set, defines flags for serve's test knobs
// (serve.Knobs). Only the tests set it, in the processes they run as the
// program: the program itself has no such flag.
var serveKnobFlags func(*flag.FlagSet, *serve.Knobs)

func newServeFlags(stderr io.Writer) *serveFlags {
	fs := newFlagSet("serve", serve.Help, stderr)
	cfg := serve.FlagsVar(fs)
	if serveKnobFlags != nil {
		serveKnobFlags(fs, &cfg.Knobs)
	}
	return &serveFlags{fs: fs, cfg: cfg}
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	f := newServeFlags(stderr)
	if err := parse(f.fs, args); err != nil {
		return err
	}
	return serve.Run(ctx, f.cfg, stderr)
}
