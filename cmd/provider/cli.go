package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// version is the micro service version this command registers.
const version = "0.1.0"

const defaultServer = cli.DefaultServer

// errUsage marks a command line that cannot be run; main exits with 2.
var errUsage = cli.ErrUsage

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

const mainUsage = `provider runs and inspects the fake task service.

The service stands in for an external task system. It is reached only over
NATS (micro service "fake-task-provider") and keeps its state in Pebble. A
create call is keyed by the caller's scope and intent id: a new key creates
one task; the same key with the same request digest is replayed with the
first task id; the same key with a different digest is an
idempotency_conflict and creates nothing. A key is kept while an approval
the service has seen for it may still pass the gate (plus an allowance for
clock skew and a margin), then compacted; it outlives its task when the
task is deleted. The service counts requests received, creates executed and
tasks existing, in total and per scope, exactly and across restarts.

Usage:

  provider serve   [--server URL] --data DIR
  provider adopt   [--server URL] --data DIR --replace STORE_ID
  provider records [--server URL] --kind requests|creates|tasks|intents|deletes [--scope S] [--intent ID] [--after N] [--limit N]
  provider delete  [--server URL] (--intent ID [--scope S] | --task-id ID)
  provider --version

Subcommands:

  serve    run the service until SIGINT or SIGTERM
  adopt    make another store the deployment's store (dangerous: the replaced
           store's intents are created again when resent)
  records  print audit records as JSON lines
  delete   delete a task as its owner would; its key stays

The three counters, in total and per scope, are shown by 'executor status'.

The NATS server defaults to $NATS_URL, else ` + defaultServer + `. Every command also takes
--creds, --nkey, --user/--password ($NATS_PASSWORD), --tls-cert/--tls-key/--tls-ca
(or --tlscert/--tlskey/--tlsca, $NATS_CERT/$NATS_KEY/$NATS_CA) and --inbox-prefix.
Traces go to $OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP) when it is set; the OTEL_* variables apply
(docs/TRACING.md).
Run 'provider COMMAND --help' for a command's flags.
`

// testOnly is what only this package's tests add to the program (its
// fault_test.go fills it): the fault subcommand, and serve's
// --allow-faults, which registers the service's fault endpoint. The
// production program has neither.
var testOnly struct {
	subcommands map[string]func(*app, context.Context, []string) error
	allowFaults func(*flag.FlagSet) *bool
}

// app holds the streams and environment of one invocation.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *app {
	return &app{stdout: stdout, stderr: stderr, getenv: getenv}
}

func (c *app) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, mainUsage)
		return usageErr("no subcommand given")
	}
	subcommands := map[string]func(context.Context, []string) error{
		"serve": c.serve, "adopt": c.adopt, "records": c.records, "delete": c.delete,
	}
	if sub, ok := subcommands[args[0]]; ok {
		return sub(ctx, args[1:])
	}
	if sub, ok := testOnly.subcommands[args[0]]; ok {
		return sub(c, ctx, args[1:])
	}
	if cli.HelpOrVersion("provider", mainUsage, args[0], c.stdout) {
		return nil
	}
	fmt.Fprint(c.stderr, mainUsage)
	return usageErr("unknown subcommand %q", args[0])
}

// flagSet makes the flag set of one subcommand; its --help prints the
// explanation followed by the flags.
func (c *app) flagSet(name, synopsis, explanation string) *flag.FlagSet {
	return cli.NewFlagSet("provider "+name,
		fmt.Sprintf("Usage: provider %s %s\n\n%s\n", name, synopsis, explanation), c.stderr)
}

// parse parses args, refusing positional arguments.
func parse(fs *flag.FlagSet, args []string) error { return cli.ParseNoArgs(fs, args) }

// common are the flags every subcommand has.
type common struct {
	conn      *cli.ConnConfig
	logFormat *string
	logLevel  *string
}

func (c *app) commonFlags(fs *flag.FlagSet) *common {
	cf := &common{conn: cli.ConnFlagsEnv(fs, c.getenv)}
	cf.logFormat, cf.logLevel = cli.LogFlags(fs)
	return cf
}

func (cf *common) logger(w io.Writer) (*slog.Logger, error) {
	log, err := cli.NewLogger(w, *cf.logFormat, *cf.logLevel)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return log, nil
}

// connect connects to NATS as name; a flag that cannot make a connection
// option is a usage error.
func (cf *common) connect(name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if err := cf.checkConn(); err != nil {
		return nil, err
	}
	return cf.conn.Connect(name, log, extra...)
}

// open is connect for a command that closes the connection when done: its
// Close drains it.
func (cf *common) open(name string, log *slog.Logger) (*cli.Conn, error) {
	if err := cf.checkConn(); err != nil {
		return nil, err
	}
	return cf.conn.Open(name, log)
}

// checkConn makes a flag that cannot make a connection option a usage error.
func (cf *common) checkConn() error {
	if _, err := cf.conn.Options(); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// clientFlags are the flags of the subcommands that call the service.
type clientFlags struct {
	*common
	timeout time.Duration
}

func (c *app) clientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{common: c.commonFlags(fs)}
	fs.DurationVar(&cf.timeout, "timeout", provider.DefaultTimeout, "how long to wait for each reply of the service")
	return cf
}

// dial connects to NATS for a client subcommand; close the connection when done.
func (cf *clientFlags) dial(name string) (*cli.Conn, *provider.Client, error) {
	if _, err := cf.logger(io.Discard); err != nil {
		return nil, nil, err
	}
	nc, err := cf.open("provider "+name, nil)
	if err != nil {
		return nil, nil, err
	}
	client := provider.NewClient(nc.NC)
	client.Timeout = cf.timeout
	return nc, client, nil
}
