package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// stack is what a measurement runs against: a NATS server (embedded, or the
// one at --server), the task service, and the executors the bench starts.
type stack struct {
	o       *Options
	log     *slog.Logger
	dir     string // embedded: the data directory
	preload int

	srv      *server.Server  // embedded server
	svcStack *embedded.Stack // embedded server with the service in this process
	child    *exec.Cmd       // the service in its own process
	childEnd chan error
	rss      rssSampler

	url  string
	nc   *nats.Conn
	js   jetstream.JetStream
	svc  *provider.Client
	topo topology.Config
	gate *gate.Checker

	dav *caldav.Adapter // the executors' task service, when Options.CalDAV is set

	running []*executor.Executor // the executors of the current measurement
	// retried counts the deliveries the executors gave back after a failed
	// call, for the end-of-run check.
	retried atomic.Int64
	// clock, when set, times the stages of the executors started next
	// (live runs).
	clock *stageClock
}

// receiptBatches sums the receipt batches of the running executors.
func (s *stack) receiptBatches() (batches, receipts int64) {
	for _, ex := range s.running {
		b, r := ex.ReceiptBatches()
		batches += b
		receipts += r
	}
	return batches, receipts
}

// startStack starts (or connects to) the server and the service. With an
// embedded server and preload > 0, the service's store is first loaded with
// that many intents.
func startStack(ctx context.Context, o *Options, preload int, st *stages) (*stack, error) {
	s := &stack{o: o, log: o.Log, preload: preload, topo: o.topology(), gate: o.checker}
	if o.CalDAV != "" {
		dav, err := caldav.New(caldav.Config{CollectionURL: o.CalDAV})
		if err != nil {
			return nil, fmt.Errorf("bench: --caldav-url: %w", err)
		}
		s.dav = dav
	}
	if o.Embedded {
		s.dir = filepath.Join(o.Dir, fmt.Sprintf("stored-%d", preload))
		if err := os.RemoveAll(s.dir); err != nil {
			return nil, err
		}
		pdir := filepath.Join(s.dir, "provider")
		if preload > 0 {
			done := st.begin(fmt.Sprintf("preload %d intents", preload))
			if err := os.MkdirAll(pdir, 0o755); err != nil {
				return nil, err
			}
			if err := provider.Preload(pdir, preload); err != nil {
				return nil, fmt.Errorf("bench: preloading the task service's store: %w", err)
			}
			// Write back what the load left in the page cache now, not
			// during the measurement.
			syscall.Sync()
			done()
		}
		if o.ServiceProcess == nil {
			stk, err := embedded.StartStack(embedded.StackOptions{Dir: s.dir, Port: -1, Logger: o.Log})
			if err != nil {
				return nil, err
			}
			s.svcStack, s.url = stk, stk.URL()
		} else {
			srv, err := embedded.Start(embedded.Options{Dir: s.dir, Port: -1})
			if err != nil {
				return nil, err
			}
			s.srv, s.url = srv, srv.ClientURL()
			if err := s.startServiceProcess(pdir); err != nil {
				s.close()
				return nil, err
			}
		}
	} else {
		s.url = o.Server
	}
	nc, err := s.connect("bench", nats.MaxReconnects(-1))
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench: connecting to %s: %w", cli.RedactURL(s.url), err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		s.close()
		return nil, err
	}
	s.svc = provider.NewClient(nc)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The replicas are those of the deployment's streams (1 when new): the
	// bench never changes them.
	s.topo.Replicas = 0
	if s.topo, err = topology.Await(tctx, s.js, s.topo, topology.SetUpOptions{Logger: s.log}, 30*time.Second); err != nil {
		s.close()
		return nil, err
	}
	// The service answers before the measurement starts.
	if err := s.awaitService(tctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// startServiceProcess runs the task service as its own process, so that its
// memory can be read on its own. startStack then waits until it answers.
func (s *stack) startServiceProcess(dir string) error {
	cmd := s.o.ServiceProcess(s.url, dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: starting the task service process: %w", err)
	}
	s.child, s.childEnd = cmd, make(chan error, 1)
	go func() { s.childEnd <- cmd.Wait() }()
	s.rss.start(cmd.Process.Pid)
	return nil
}

// awaitService waits until the task service answers, or its process ends.
func (s *stack) awaitService(ctx context.Context) error {
	for {
		_, err := s.svc.Stats(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bench: the task service does not answer: %w", err)
		}
		select {
		case werr := <-s.childEnd:
			s.childEnd <- werr
			return fmt.Errorf("bench: the task service process ended at start: %v", werr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serviceMemory returns the service process's resident memory now and at its
// peak, when the service runs in its own process.
func (s *stack) serviceMemory() (now, peak int64, ok bool) {
	if s.child == nil {
		return 0, 0, false
	}
	return s.rss.read()
}

func (s *stack) close() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.child != nil {
		s.rss.stop()
		stopChild(s.child.Process, syscall.SIGTERM, s.childEnd, 20*time.Second)
	}
	if s.svcStack != nil {
		_ = s.svcStack.Close()
	}
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	if s.o.Embedded {
		// What this stack wrote is written back now, not during the
		// next measurement.
		syscall.Sync()
	}
}

// executors runs k executor instances, each on its own connection, until
// the returned stop is called; stop lets them finish what they took.
func (s *stack) executors(k int) (stop func(), err error) {
	s.running = s.running[:0]
	var stops []func() error
	var conns []*nats.Conn
	stop = func() {
		for _, st := range stops {
			_ = st()
		}
		for _, nc := range conns {
			nc.Close()
		}
	}
	for i := 1; i <= k; i++ {
		nc, err := s.connect("bench-executor-"+strconv.Itoa(i), nats.MaxReconnects(-1))
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		ex, err := executor.New(nc, s.executorConfig(nc, i))
		if err != nil {
			stop()
			return nil, err
		}
		s.running = append(s.running, ex)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		stopEx, err := ex.Start(ctx)
		cancel()
		if err != nil {
			stop()
			return nil, fmt.Errorf("bench: executor %d: %w", i, err)
		}
		stops = append(stops, stopEx)
	}
	return stop, nil
}

// executorConfig is the configuration of the bench's executor i on nc.
func (s *stack) executorConfig(nc *nats.Conn, i int) executor.Config {
	svc := provider.NewClient(nc).TaskService()
	if s.dav != nil {
		svc = s.dav
	}
	var onReceipt func(*document.Receipt, time.Duration)
	if s.clock != nil {
		svc, onReceipt = s.clock.service(svc), s.clock.receipt
	}
	return executor.Config{
		ID:           "bench-" + strconv.Itoa(i),
		TaskService:  svc,
		OnReceipt:    onReceipt,
		Concurrency:  s.o.Concurrency,
		ReceiptBatch: s.o.ReceiptBatch,
		Topology:     s.topo,
		Logger:       s.log,
		Gate:         s.gate,
		OnRetry:      func(uint64, error) { s.retried.Add(1) },
	}
}

// consumerLeft returns how many messages the executors' consumer has not
// finished: not yet delivered plus delivered and not yet acked.
func (s *stack) consumerLeft(ctx context.Context) (int, error) {
	c, err := s.js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

// lastSeq is the last sequence stored on a stream.
func (s *stack) lastSeq(ctx context.Context, stream string) (uint64, error) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// rssSampler follows a process's resident memory.
type rssSampler struct {
	mu   sync.Mutex
	pid  int
	max  int64
	last int64
	done chan struct{}
}

func (r *rssSampler) start(pid int) {
	done := make(chan struct{})
	r.pid, r.done = pid, done
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.read()
			}
		}
	}()
}

func (r *rssSampler) stop() {
	if r.done != nil {
		close(r.done)
		r.done = nil
	}
}

// read returns the resident memory now and the peak (the larger of the
// kernel's high-water mark and what was sampled).
func (r *rssSampler) read() (now, peak int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.pid))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		return r.last, r.max, r.max > 0
	}
	var hwm int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			r.last = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	r.max = max(r.max, r.last, hwm)
	return r.last, r.max, true
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is the CPU time the service process has used, when it runs in
// its own process.
func (s *stack) childCPU() time.Duration {
	if s.child == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.child.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 14th and 15th fields of the line, in clock ticks.
	line := string(b)
	f := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// connect opens a connection to the server under test, with the run's
// authentication and TLS options.
func (s *stack) connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	return natsconn.Connect(s.url, name, append(opts, s.o.ConnOptions...)...)
}
