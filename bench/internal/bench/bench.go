package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Modes.
const (
	Backlog = "backlog"
	Live    = "live"
)

// Rate is an offered rate for the live mode: so many approvals a second, or
// half of the maximum measured by a backlog drain in the same run.
type Rate struct {
	PerSecond float64
	HalfOfMax bool
}

// Options configure a run.
type Options struct {
	Mode string
	// Server is the URL of a running deployment (server, task service);
	// ignored with Embedded. ConnOptions (authentication, TLS) go with every
	// connection the bench makes to it.
	Server      string
	ConnOptions []nats.Option
	// Embedded runs a NATS server (fsync before every ack) and the task
	// service here, with their data under Dir.
	Embedded bool
	Dir      string

	// Approvals is the backlog of one drain (backlog mode; in live mode the
	// drain that finds the maximum for a "half" rate).
	Approvals int
	// Executors lists the numbers of executor instances to measure, each
	// on a fresh backlog.
	Executors    []int
	Concurrency  int // deliveries handled at once per executor
	ReceiptBatch int // receipts per batch at most
	// Preload lists the numbers of intents stored in the task service
	// before a measurement (embedded only), each on a fresh store.
	Preload []int

	Resend       float64 // share of approvals sent again (the same bytes)
	Conflict     float64 // share of changed requests under a known intent id
	Payload      int     // envelope bytes; 0 keeps the natural size
	PublishBatch int     // approvals per atomic batch when storing a backlog
	Unsigned     bool    // unsigned approvals (the gate then skips signature, expiry and scope)

	// CalDAV, when set, is a CalDAV collection URL (no authentication)
	// that the executors call instead of the fake task service. The check
	// then counts the collection's tasks instead of reading the fake
	// service's counters.
	CalDAV string

	// Live mode.
	//
	// Publishers each store what is due as one atomic batch at a time (1
	// by default: the stream commits atomic batches one after another, so
	// more publishers make an approval wait for the others' batches too).
	Publishers int
	Rates      []Rate
	Duration   time.Duration

	// References.
	NoReferences bool
	RefApprovals int // approvals of each reference; 0 means Approvals
	// Ledger says whether to measure the JetStream + PostgreSQL ledger
	// reference: LedgerAuto (the default) when PostgreSQL is installed,
	// LedgerOn always, LedgerOff never. LedgerPool is its connections per
	// instance; 0 means Concurrency (one per handler).
	Ledger     string
	LedgerPool int

	// ServiceProcess, when set (embedded only), makes the command that
	// runs the task service as its own process ("provider serve"), serving
	// the store in dir on the server at url until SIGTERM. Nil runs it in
	// this process.
	ServiceProcess func(url, dir string) *exec.Cmd

	// Timeout bounds one drain or live run.
	Timeout time.Duration

	// Status gets the stage lines and, on a terminal, the progress bar.
	Status   io.Writer
	Terminal bool
	Log      *slog.Logger

	key     *sign.Key
	checker *gate.Checker
	// run starts every id the run generates, so that a second run against
	// the same deployment does not meet the first run's intents.
	run string
}

func (o *Options) topology() topology.Config { return topology.DefaultConfig() }

// defaults checks the options and fills in what is left unset.
func (o *Options) defaults() error {
	if err := o.checkTarget(); err != nil {
		return err
	}
	if err := o.defaultWorkload(); err != nil {
		return err
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(o.Status, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Embedded && o.Dir == "" {
		return errors.New("bench: --embedded needs a data directory")
	}
	if o.Unsigned {
		o.checker = &gate.Checker{AllowUnsigned: true}
		return nil
	}
	o.key = scenario.TestKey()
	kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, o.key.Public()))
	if err != nil {
		return fmt.Errorf("bench: trusting the test reviewer's key: %w", err)
	}
	o.checker = &gate.Checker{Keys: kr}
	return nil
}

// checkTarget checks the mode and what the run measures (a server or an
// embedded one), and draws the run's id.
func (o *Options) checkTarget() error {
	if o.Mode == "" {
		o.Mode = Backlog
	}
	if o.Mode != Backlog && o.Mode != Live {
		return fmt.Errorf("bench: mode %q: want backlog or live", o.Mode)
	}
	if !o.Embedded && o.Server == "" {
		return errors.New("bench: name a server (--server) or run one here (--embedded)")
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	o.run = "b" + hex.EncodeToString(r[:])
	if o.Embedded && len(o.ConnOptions) > 0 {
		return errors.New("bench: authentication and TLS options are for --server; the embedded server has neither")
	}
	return nil
}

// defaultWorkload checks and fills in the sizes of the run: approvals,
// executors, preloads, rates, the ledger reference and the timeout.
func (o *Options) defaultWorkload() error {
	if o.Approvals <= 0 {
		o.Approvals = 20_000
	}
	if len(o.Executors) == 0 {
		o.Executors = []int{1}
	}
	for _, k := range o.Executors {
		if k < 1 || k > 64 {
			return fmt.Errorf("bench: %d executors: want 1 to 64", k)
		}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if len(o.Preload) == 0 {
		o.Preload = []int{0}
	}
	for _, p := range o.Preload {
		if p < 0 {
			return fmt.Errorf("bench: preload %d: want 0 or more", p)
		}
		if p > 0 && !o.Embedded {
			return errors.New("bench: --preload needs --embedded: the bench loads the service's store before the service starts")
		}
	}
	if o.PublishBatch <= 0 {
		o.PublishBatch = 500
	}
	if o.Publishers <= 0 {
		o.Publishers = 1
	}
	if len(o.Rates) == 0 {
		o.Rates = []Rate{{PerSecond: 100}}
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	switch o.Ledger {
	case "":
		o.Ledger = LedgerAuto
	case LedgerAuto, LedgerOn, LedgerOff:
	default:
		return fmt.Errorf("bench: ledger %q: want auto, on or off", o.Ledger)
	}
	if o.RefApprovals <= 0 {
		o.RefApprovals = o.Approvals
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	return nil
}

// stages times the stages of a run and reports each as it ends.
type stages struct {
	w    io.Writer
	mu   sync.Mutex
	list []stageTime
}

type stageTime struct {
	name string
	took time.Duration
}

func (s *stages) begin(name string) (end func()) {
	start := time.Now()
	return func() {
		took := time.Since(start)
		s.mu.Lock()
		s.list = append(s.list, stageTime{name, took})
		s.mu.Unlock()
		fmt.Fprintf(s.w, "stage %-48s %s\n", name, took.Round(time.Millisecond))
	}
}

// Run runs the benchmark and writes its report to stdout. It returns an
// error if a measurement fails or its check finds anything lost or doubled.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	if err := o.defaults(); err != nil {
		return err
	}
	st := &stages{w: o.Status}
	rep := &report{o: &o, started: time.Now()}
	var err error
	switch o.Mode {
	case Backlog:
		err = runBacklog(ctx, &o, st, rep)
	case Live:
		err = runLive(ctx, &o, st, rep)
	}
	rep.stages = st.list
	rep.write(stdout)
	if err == nil && !rep.ok() {
		err = errors.New("bench: the check found approvals lost or doubled (see above)")
	}
	return err
}

// runBacklog measures drains: for each preload, a fresh stack; on the first,
// the references; then one drain per executor count.
func runBacklog(ctx context.Context, o *Options, st *stages, rep *report) error {
	for pi, preload := range o.Preload {
		s, err := startStack(ctx, o, preload, st)
		if err != nil {
			return err
		}
		err = func() error {
			defer s.close()
			if pi == 0 && !o.NoReferences {
				if err := measureReferences(ctx, s, st, rep); err != nil {
					return err
				}
			}
			for i, k := range o.Executors {
				// Intent ids of their own for every drain: a drain of ids
				// already created would only replay.
				d, err := s.drain(ctx, k, fmt.Sprintf("%s-s%d-%d-e%d", o.run, pi, i, k), st)
				if d != nil {
					rep.drains = append(rep.drains, d)
				}
				if err != nil {
					return err
				}
			}
			if now, peak, ok := s.serviceMemory(); ok {
				rep.memory = append(rep.memory, memoryFigure{preload: preload, after: "the drains", now: now, peak: peak})
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// machine describes where the run happens.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d CPUs, %s/%s, %s, host %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.TrimSpace(host))
}
