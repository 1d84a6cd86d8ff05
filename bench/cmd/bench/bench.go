package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/bench/internal/bench"
	"github.com/sendtwice/sendtwice/internal/cli"
)

const benchHelp = `Usage: bench [backlog|live] [--embedded | --server URL] [flags]
       bench ab [--pairs N] [--approvals N] [--unsigned] A_DIR B_DIR
       bench --version

Measures durable end-to-end throughput (backlog) or publish→receipt latency (live), with
the references measured in the same run: naive JetStream (consume, publish one receipt-sized
message alone, ack; no gate, no service), batched JetStream (the same with the receipt-sized
messages stored in atomic batches, each message acked after its batch's commit ack: the
JetStream part of the executor alone), Pebble alone (the service's batch per request,
synced, by as many writers as the executors have handlers) and JetStream + PostgreSQL ledger
(the conventional design: the same approvals and handlers, one PostgreSQL transaction per
approval keyed by the intent id, the receipt published alone, ack; on a private cluster that
the bench starts with initdb in a temporary directory, synchronous_commit and fsync on;
skipped with a line in the report when PostgreSQL is not installed). Prints the figures and their
ratios to the references, the time per stage, and a check that every approval has its
receipt and that creates executed equal the distinct intents; exits 1 if anything was lost
or doubled.

backlog: --approvals approvals are stored first (atomic batches of --publish-batch), then
  --executors instances are started; the figure is the time until every message is acked
  (each only once its receipt is stored). A list (--executors 1,2,3) measures each on a fresh
  backlog; --preload 0,1000000 measures each on a fresh store preloaded with that many
  intents (--embedded only).
live: --publishers publishers offer approvals at each --rate (approvals/s, or "half": half of
  the maximum, measured first by a backlog drain) for --duration; each stores what is due as
  one atomic batch and waits for its commit before taking the next.

With --embedded, a NATS server (fsync before every ack) runs in this process and the task
service in its own process, "provider serve" (so that its memory can be read), keeping their
data in --data (default: a temporary directory, removed at the end). The provider command is
--provider-bin, else a provider executable beside this one, else one on $PATH (build it with
"go build ./cmd/provider"). Executors always run in this process.

With --server (default $NATS_URL), the deployment's task service must be running; the bench
provisions the streams if they are missing, creates and deletes the references' streams, and
connects with --creds, --nkey or --user/--password ($NATS_PASSWORD) and the --tls-* files.
That account needs to publish approvals, consume, store receipts, manage streams and call the
service: an operator's account, not one of the least-privilege roles in deploy/auth.

`

// benchFlags are the command line of a bench run beyond bench.Options.
type benchFlags struct {
	conn                           *cli.ConnConfig
	data, executors, preload       *string
	rates, cpuProfile, providerBin *string
	logFormat, logLevel            *string
	inproc                         *bool
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := bench.Options{Mode: bench.Backlog}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.Mode, args = args[0], args[1:]
	}
	fs := cli.NewFlagSet("bench", benchHelp, stderr)
	f := benchFlagSet(fs, &o)
	if err := fs.Set("log-level", "warn"); err != nil {
		return err
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := f.apply(fs, &o, stderr); err != nil {
		return err
	}
	if *f.cpuProfile != "" {
		stopProfile, err := cli.StartCPUProfile(*f.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	if o.Embedded {
		cleanup, err := f.embedded(&o)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	return bench.Run(ctx, o, stdout)
}

// benchFlagSet defines the bench's flags on fs, the plain ones straight
// into o.
func benchFlagSet(fs *flag.FlagSet, o *bench.Options) *benchFlags {
	f := &benchFlags{conn: cli.ConnFlags(fs)}
	fs.BoolVar(&o.Embedded, "embedded", false, "run a NATS server and the task service here instead of using --server")
	f.data = fs.String("data", "", "`DIR` for the embedded server's and service's data (default: a temporary directory, removed at the end)")
	fs.IntVar(&o.Approvals, "approvals", 20000, "approvals in each backlog `N`")
	f.executors = fs.String("executors", "1", "executor instances, a `LIST` such as 1,2,3: one measurement each")
	fs.IntVar(&o.Concurrency, "concurrency", 512, "deliveries each executor handles at once (checked and sent to the service)")
	fs.IntVar(&o.ReceiptBatch, "receipt-batch", 1000, "receipts per atomic batch at most (1: each alone)")
	f.preload = fs.String("preload", "0", "intents stored in the service before measuring, a `LIST` such as 0,1000000 (--embedded)")
	fs.Float64Var(&o.Resend, "resend", 0.10, "share of approvals sent again")
	fs.Float64Var(&o.Conflict, "conflict", 0.05, "share of changed requests under an intent id already sent")
	fs.IntVar(&o.Payload, "payload", 0, "envelope size in `BYTES` (0: the natural size, about 1.5 KB)")
	fs.IntVar(&o.PublishBatch, "publish-batch", 500, "approvals per atomic batch when storing a backlog")
	fs.BoolVar(&o.Unsigned, "unsigned", false, "send unsigned approvals (the gate skips the signature, expiry and scope checks)")
	fs.StringVar(&o.CalDAV, "caldav-url", "", "the executors call this CalDAV collection `URL` (no authentication) instead of the fake task service;\nthe check counts its tasks instead of the service's counters")
	fs.IntVar(&o.Publishers, "publishers", 1, "live: concurrent publishers, each storing what is due as one atomic batch at a time")
	f.rates = fs.String("rate", "100", "live: offered rates, a `LIST` of approvals/s or \"half\" (of the maximum), such as 100,half")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "live: how long each rate is offered")
	fs.BoolVar(&o.NoReferences, "no-references", false, "skip the reference measurements")
	fs.IntVar(&o.RefApprovals, "ref-approvals", 0, "messages in each reference measurement (default: --approvals)")
	fs.StringVar(&o.Ledger, "ledger", bench.LedgerAuto, "the JetStream + PostgreSQL ledger reference: auto (when PostgreSQL is installed), on (required) or off")
	fs.IntVar(&o.LedgerPool, "ledger-pool", 0, "PostgreSQL connections per instance in the ledger reference (default: --concurrency, one per handler)")
	f.inproc = fs.Bool("service-in-process", false, "--embedded: run the task service in this process instead of its own")
	f.providerBin = fs.String("provider-bin", "", "--embedded: the provider command that serves the task service in its own process\n(default: a provider executable beside this one, else on $PATH)")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound for one measurement")
	f.cpuProfile = fs.String("cpuprofile", "", "write a CPU profile of this process to `FILE` (and of the service process to FILE.service)")
	f.logFormat, f.logLevel = cli.LogFlags(fs)
	return f
}

// apply checks the parsed flags and completes o with what they say.
func (f *benchFlags) apply(fs *flag.FlagSet, o *bench.Options, stderr io.Writer) error {
	if fs.NArg() != 0 {
		return usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	if o.Mode != bench.Backlog && o.Mode != bench.Live {
		return usageErr(fs, "mode %q: want backlog or live", o.Mode)
	}
	if o.Ledger != bench.LedgerAuto && o.Ledger != bench.LedgerOn && o.Ledger != bench.LedgerOff {
		return usageErr(fs, "--ledger %q: want auto, on or off", o.Ledger)
	}
	var err error
	if o.Executors, err = intList(*f.executors); err != nil {
		return usageErr(fs, "--executors: %v", err)
	}
	if o.Preload, err = intList(*f.preload); err != nil {
		return usageErr(fs, "--preload: %v", err)
	}
	if o.Rates, err = rateList(*f.rates); err != nil {
		return usageErr(fs, "%v", err)
	}
	log, err := cli.NewLogger(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	o.Log, o.Status, o.Server = log, stderr, f.conn.Server
	if err := f.connection(fs, o); err != nil {
		return err
	}
	if st, ok := stderr.(*os.File); ok {
		if fi, err := st.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			o.Terminal = true
		}
	}
	return nil
}

// connection refuses authentication and TLS flags with --embedded, and
// otherwise turns them into connection options.
func (f *benchFlags) connection(fs *flag.FlagSet, o *bench.Options) error {
	if !o.Embedded {
		var err error
		if o.ConnOptions, err = f.conn.Options(); err != nil {
			return usageErr(fs, "%v", err)
		}
		return nil
	}
	var given []string
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(cli.AuthFlagNames, fl.Name) {
			given = append(given, "--"+fl.Name)
		}
	})
	if len(given) > 0 {
		return usageErr(fs, "%s: for --server; the embedded server has no authentication or TLS", strings.Join(given, ", "))
	}
	return nil
}

// embedded sets up an embedded run: the data directory (a temporary one
// unless --data names one; cleanup removes it) and, unless the service runs
// in this process, the provider command that serves it.
func (f *benchFlags) embedded(o *bench.Options) (cleanup func(), err error) {
	cleanup = func() {}
	if !*f.inproc {
		bin, err := findProvider(*f.providerBin)
		if err != nil {
			return nil, err
		}
		level, profile := *f.logLevel, *f.cpuProfile
		o.ServiceProcess = func(url, dir string) *exec.Cmd {
			cmd := exec.Command(bin, "serve", "--server", url, "--data", dir, "--log-level", level)
			if profile != "" {
				cmd.Args = append(cmd.Args, "--cpuprofile", profile+".service")
			}
			return cmd
		}
	}
	o.Dir = *f.data
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "sendtwice-bench-")
		if err != nil {
			return nil, err
		}
		o.Dir, cleanup = dir, func() { os.RemoveAll(dir) }
	}
	return cleanup, nil
}

// usageErr prints the usage and returns a usage error (exit status 2).
func usageErr(fs *flag.FlagSet, format string, args ...any) error {
	fs.Usage()
	return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf(format, args...)}
}

// errNoProvider says that no provider command was found to serve the task
// service of an embedded run.
var errNoProvider = errors.New("bench: no provider command found to run the task service; build it beside this one with \"go build ./cmd/provider\", or name it with --provider-bin (or run it in this process with --service-in-process)")

// findProvider returns the provider command to run: the one named, else a
// provider executable beside this one, else one on $PATH.
func findProvider(named string) (string, error) {
	if named != "" {
		p, err := exec.LookPath(named)
		if err != nil {
			return "", fmt.Errorf("--provider-bin %s: %w", named, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), "provider")
		if p, err := exec.LookPath(beside); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("provider"); err == nil {
		return p, nil
	}
	return "", errNoProvider
}

// rateList reads --rate: approvals per second or "half", comma-separated.
func rateList(s string) ([]bench.Rate, error) {
	var out []bench.Rate
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "half" {
			out = append(out, bench.Rate{HalfOfMax: true})
			continue
		}
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--rate %q: want approvals per second or \"half\"", r)
		}
		out = append(out, bench.Rate{PerSecond: v})
	}
	return out, nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
