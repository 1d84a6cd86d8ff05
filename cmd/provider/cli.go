package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	sharedcli "github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// version is the micro service version this command registers.
const version = "0.1.0"

const defaultServer = "nats://127.0.0.1:4222"

// errUsage marks a command line that cannot be run; main exits with 2.
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

const mainUsage = `provider runs and inspects the fake task service.

The service stands in for an external task system. It is reached only over
NATS (micro service "fake-task-provider") and keeps its state in Pebble. A
create call is keyed by the caller's intent id: a new intent id creates one
task; the same intent id with the same request digest is replayed with the
first task id; the same intent id with a different digest is an
idempotency_conflict and creates nothing. The service counts requests
received, creates executed and tasks existing, exactly and across restarts.

Usage:

  provider serve   [--server URL] --data DIR [--allow-faults]
  provider stats   [--server URL] [--json]
  provider records [--server URL] --kind requests|creates|tasks|intents [--intent ID] [--after N] [--limit N]
  provider fault   [--server URL] --drop-replies N
  provider --version

Subcommands:

  serve    run the service until SIGINT or SIGTERM
  stats    print the three counters
  records  print audit records as JSON lines
  fault    arm the fault switch of a service started with --allow-faults

The NATS server defaults to $NATS_URL, else ` + defaultServer + `. Every command also takes
--creds, --nkey, --user/--password ($NATS_PASSWORD), --tls-cert/--tls-key/--tls-ca
(or --tlscert/--tlskey/--tlsca, $NATS_CERT/$NATS_KEY/$NATS_CA) and --inbox-prefix.
Run "provider <subcommand> --help" for its flags.
`

// cli holds the streams and environment of one invocation.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func newCLI(stdout, stderr io.Writer, getenv func(string) string) *cli {
	return &cli{stdout: stdout, stderr: stderr, getenv: getenv}
}

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, mainUsage)
		return usageErr("no subcommand given")
	}
	switch args[0] {
	case "serve":
		return c.serve(ctx, args[1:])
	case "stats":
		return c.stats(ctx, args[1:])
	case "records":
		return c.records(ctx, args[1:])
	case "fault":
		return c.fault(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, mainUsage)
		return nil
	case "version", "-version", "--version":
		fmt.Fprintln(c.stdout, "provider", sharedcli.Version())
		return nil
	default:
		fmt.Fprint(c.stderr, mainUsage)
		return usageErr("unknown subcommand %q", args[0])
	}
}

// flagSet makes the flag set of one subcommand; its --help prints the
// explanation followed by the flags.
func (c *cli) flagSet(name, synopsis, explanation string) *flag.FlagSet {
	fs := flag.NewFlagSet("provider "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: provider %s %s\n\n%s\nFlags:\n", name, synopsis, explanation)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, refusing positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%s: %v", fs.Name(), err)
	}
	sharedcli.ApplyEnv(fs)
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// common are the flags every subcommand has.
type common struct {
	server    string
	logFormat string
	logLevel  string
	auth      *sharedcli.ConnConfig
}

func (c *cli) commonFlags(fs *flag.FlagSet) *common {
	cf := &common{}
	sharedcli.ServerFlagVar(fs, &cf.server, c.getenv)
	fs.StringVar(&cf.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&cf.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cf.auth = sharedcli.AuthFlagsEnv(fs, c.getenv)
	return cf
}

// natsOptions are the authentication and TLS options from the flags.
func (cf *common) natsOptions() ([]nats.Option, error) {
	opts, err := cf.auth.Options()
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return opts, nil
}

func (cf *common) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cf.logLevel)); err != nil {
		return nil, usageErr("--log-level %q: want debug, info, warn or error", cf.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(cf.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageErr("--log-format %q: want text or json", cf.logFormat)
	}
}

// clientFlags are the flags of the subcommands that call the service.
type clientFlags struct {
	*common
	timeout time.Duration
}

func (c *cli) clientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{common: c.commonFlags(fs)}
	fs.DurationVar(&cf.timeout, "timeout", provider.DefaultTimeout, "how long to wait for each reply of the service")
	return cf
}

// dial connects to NATS for a client subcommand; close the connection when done.
func (cf *clientFlags) dial(name string) (*nats.Conn, *provider.Client, error) {
	if _, err := cf.logger(io.Discard); err != nil {
		return nil, nil, err
	}
	auth, err := cf.natsOptions()
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(cf.server, append(auth, nats.Name("provider "+name))...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", sharedcli.RedactURL(cf.server), err)
	}
	client := provider.NewClient(nc)
	client.Timeout = cf.timeout
	return nc, client, nil
}
