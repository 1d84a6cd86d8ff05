package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/cmd/internal/ops"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Help is serve's usage: what a person needs first; the details are in
// the flags' own lines.
const Help = `serve [--config FILE] (--embedded | --server URLS) (--trusted-approvers FILE | --insecure-allow-unsigned)

Runs an executor: it takes the approved requests of the APPROVALS stream through the shared
consumer "executor", checks each at the gate, calls the task service keyed by the intent id,
stores the receipt, then acks. The streams and the consumer are made at start if missing.

  executor serve --embedded --insecure-allow-unsigned    everything in one process, to try it
  executor serve --server nats://HOST:4222 --trusted-approvers FILE    join a NATS server

Before the first delivery it reads the task service once, creating nothing (a refused login or a
missing project or field stops it), and records which service it calls in the bucket
sendtwice-topology, for executor status and verify. SIGINT or SIGTERM finishes the deliveries
in flight and exits; a second one exits at once.`

// consumerPollInterval is how often the consumer's lag is read for
// /metrics.
const consumerPollInterval = 5 * time.Second

// gate builds the gate's policy from the flags and, with
// --trusted-approvers, reloads the approvers on SIGHUP until the returned
// stop is called.
func (f *Config) gate(log *slog.Logger) (checker *gate.Checker, stop func(), err error) {
	stop = func() {}
	if len(f.Knobs.Faults) > 0 {
		log.Warn("FAULT INJECTION IS ON: this instance will crash or stall on purpose", "faults", len(f.Knobs.Faults))
	}
	if *f.trusted == "" && !*f.insecure {
		f.fs.Usage()
		return nil, stop, fmt.Errorf("%w: give --trusted-approvers FILE (from publisher keygen --trusted), or --insecure-allow-unsigned to accept unsigned approvals", cli.ErrUsage)
	}
	if *f.maxLifetime <= 0 {
		return nil, stop, fmt.Errorf("%w: --max-approval-lifetime must be positive", cli.ErrUsage)
	}
	checker = &gate.Checker{AllowUnsigned: *f.insecure, MaxLifetime: *f.maxLifetime}
	if *f.trusted != "" {
		if checker.Keys, err = sign.LoadTrusted(*f.trusted); err != nil {
			return nil, stop, err
		}
		log.Info("signed approvals accepted from trusted approvers", "file", *f.trusted, "approvers", checker.Keys.Len())
		stop = reloadTrustedOnHangup(*f.trusted, checker.Keys, log)
	}
	if *f.insecure {
		log.Warn("INSECURE: unsigned approvals are accepted; anyone allowed to publish approvals can approve (--insecure-allow-unsigned)")
	}
	return checker, stop, nil
}

// serving is one run of serve: what it started, to be closed in reverse.
type serving struct {
	f       *Config
	log     *slog.Logger
	reg     *prometheus.Registry
	em      *metrics.Executor
	lag     *metrics.Consumer
	srv     *ops.Server
	checks  []ops.Check
	closers []func()
	// service is the embedded task service, when there is one: if it stops
	// serving on its own (its lease taken by another instance), this
	// process stops too, rather than run executors against no service.
	service *provider.Service
	conn    *cli.Conn // drained at the end of run
	nc      *nats.Conn
	js      jetstream.JetStream
	topo    topology.Config
}

func (s *serving) onClose(f func()) { s.closers = append(s.closers, f) }

// close closes what was started, last first.
func (s *serving) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// Run checks the parsed flags and serves until ctx ends; the log goes to
// stderr.
func Run(ctx context.Context, f *Config, stderr io.Writer) error {
	if err := f.settle(); err != nil {
		return err
	}
	log, err := cli.NewLogger(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	checker, stopReload, err := f.gate(log)
	if err != nil {
		return err
	}
	defer stopReload()
	if *f.checkOnly {
		return checkConfig(log, f.conn, *f.httpAddr)
	}
	s := &serving{f: f, log: log}
	defer s.close()
	if err := s.startOps(ctx); err != nil {
		return err
	}
	if *f.embedded {
		if err := s.startEmbedded(); err != nil {
			return err
		}
	}
	if err := s.connect(ctx); err != nil {
		return err
	}
	if s.nc == nil {
		return nil // stopped while starting
	}
	ex, err := s.newExecutor(ctx, checker)
	if err != nil {
		s.conn.Close()
		return err
	}
	return s.run(ctx, ex)
}

// startOps makes the metrics and starts the HTTP server of --http.
func (s *serving) startOps(ctx context.Context) error {
	s.reg = metrics.NewRegistry()
	var err error
	if s.em, err = metrics.NewExecutor(s.reg); err != nil {
		return err
	}
	if s.lag, err = metrics.NewConsumer(s.reg); err != nil {
		return err
	}
	srv, closeOps, err := ops.Start(ctx, *s.f.httpAddr, s.reg, s.log)
	if err != nil {
		return err
	}
	s.srv = srv
	s.onClose(closeOps)
	return nil
}

// startEmbedded starts the NATS server and the task service of --embedded
// and points the connection flags at the server.
func (s *serving) startEmbedded() error {
	f := s.f
	// The executors call the fake task service only with --task-service
	// fake: for another, its store is neither opened nor made.
	noService := f.tsf.Kind != service.KindFake
	st, err := embedded.StartStack(embedded.StackOptions{Dir: *f.data, Host: f.host, Port: f.port, Logger: s.log,
		KeyClockAllowance: noneIfZero(*f.keyAllowance), KeyMargin: noneIfZero(*f.keyMargin),
		RecordsRetention: *f.retention, CompactEvery: *f.compactEvery, NoService: noService})
	if err != nil {
		return err
	}
	if noService {
		s.onClose(func() {
			if err := st.Close(); err != nil {
				s.log.Warn("stopping the embedded server", "err", err)
			}
		})
		f.conn.Server = st.URL()
		if f.envConnIgnored {
			s.log.Info("connecting to the embedded server without the NATS credentials and TLS settings of the environment (they are for --server)")
		}
		s.log.Info("embedded NATS server running; the fake task service is not started: the executors call the "+f.tsf.Kind+" task service",
			"url", f.conn.Server, "data", st.Dir(), "sync", "always")
		return nil
	}
	// The metrics and the readiness check see the store through open,
	// which is cleared before the stack closes it.
	var open atomic.Pointer[provider.Store]
	open.Store(st.Store)
	s.service = st.Service
	s.onClose(func() {
		open.Store(nil)
		if err := st.Close(); err != nil {
			s.log.Warn("stopping the embedded server", "err", err)
		}
	})
	f.conn.Server = st.URL()
	if f.envConnIgnored {
		s.log.Info("connecting to the embedded server without the NATS credentials and TLS settings of the environment (they are for --server)")
	}
	s.log.Info("embedded NATS server and task service running", "url", f.conn.Server, "data", st.Dir(),
		"store_id", st.Store.ID(), "sync", "always")
	if err := metrics.RegisterService(s.reg, func() (provider.Counts, bool) {
		if st := open.Load(); st != nil {
			return st.Stats(), true
		}
		return provider.Counts{}, false
	}); err != nil {
		return err
	}
	if err := metrics.RegisterServiceScopes(s.reg, *f.maxScopes, func() (provider.KeyCounts, []provider.ScopeCounts, bool) {
		if st := open.Load(); st != nil {
			keys, scopes := st.KeyStats()
			return keys, scopes, true
		}
		return provider.KeyCounts{}, nil, false
	}); err != nil {
		return err
	}
	s.checks = append(s.checks, ops.Check{Name: "store", Func: func(context.Context) error {
		if open.Load() == nil {
			return errors.New("the task service's store is closed")
		}
		return nil
	}})
	return nil
}

// connect connects to NATS and awaits the topology; on failure, or when ctx
// ends first, the connection is closed and s.nc stays nil.
func (s *serving) connect(ctx context.Context) error {
	f := s.f
	c, err := f.conn.Open("executor", s.log)
	if err != nil {
		return err
	}
	nc, js := c.NC, c.JS
	s.checks = append(s.checks, ops.Check{Name: "nats", Func: func(context.Context) error { return connected(nc) }})
	topo := topology.Config{AckWait: *f.ackWait, MaxDeliver: *f.maxDeliver, Replicas: *f.replicas, MaxBytes: *f.maxBytes}
	topo, err = topology.Await(ctx, js, topo,
		topology.SetUpOptions{NoProvision: *f.noProvision, ReplicasGiven: f.replicasSet, Logger: s.log}, *f.waitJS)
	if err != nil || ctx.Err() != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil // stopped while starting; s.nc stays nil
		}
		return err
	}
	s.conn, s.nc, s.js, s.topo = c, nc, js, topo
	return nil
}

// newExecutor opens the task service of --task-service (recording its calls
// when the knobs say so) and makes the executor.
func (s *serving) newExecutor(ctx context.Context, checker *gate.Checker) (*executor.Executor, error) {
	f := s.f
	svc, err := f.tsf.OpenToServe(ctx, service.Serving{NC: s.nc, JS: s.js, Provision: !*f.noProvision, Replicas: s.topo.Replicas,
		ID: *f.id, CallTimeout: *f.callTimeout, Log: s.log})
	if err != nil {
		return nil, err
	}
	// The gate refuses a request for any other (provider, destination):
	// its task service receives nothing for it.
	checker.Serves = svc.Serves
	taskService, closeRecord, err := recordTaskService(f.Knobs.RecordCalls, svc.Service, s.log)
	if err != nil {
		return nil, err
	}
	s.onClose(closeRecord)
	return executor.New(s.nc, executor.Config{
		ID:          *f.id,
		TaskService: taskService,
		Concurrency: *f.conc,
		CallTimeout: *f.callTimeout,
		Topology:    s.topo,
		Logger:      s.log,
		Fault:       executor.Faults(f.Knobs.Faults, s.log),
		// connect has set up the streams and the consumer (or, with
		// --no-provision, found the consumer): the executor only binds to
		// it, so that serve sets them up once.
		NoProvision: true,
		Gate:        checker,
		OnReceipt:   s.em.ObserveReceipt,
		OnRetry:     s.em.ObserveRetry,

		ConsumerCheckInterval: *f.consCheck,
	})
}

// run consumes until ctx ends or the embedded task service stops serving,
// then drains the connection.
func (s *serving) run(ctx context.Context, ex *executor.Executor) error {
	bound := make(chan struct{})
	s.addChecks(bound)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.lag.Watch(watchCtx, s.js, consumerPollInterval)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	serviceLost := s.watchService(runCtx, stopRun)
	runErr := ex.Run(runCtx, bound)
	stopWatch()
	select {
	case err := <-serviceLost:
		runErr = errors.Join(runErr, fmt.Errorf("serve: the embedded task service stopped serving: %w", err))
	default:
	}
	s.conn.Close()
	return runErr
}

// addChecks gives the readiness checks to the HTTP server, the consumer's
// last: ready once bound is closed and the consumer's lag can be read.
func (s *serving) addChecks(bound <-chan struct{}) {
	s.checks = append(s.checks, ops.Check{Name: "consumer", Func: func(ctx context.Context) error {
		select {
		case <-bound:
		default:
			return errors.New("not yet bound to the consumer")
		}
		if s.lag.Err() == nil {
			return nil
		}
		return s.lag.Read(ctx, s.js)
	}})
	if s.srv != nil {
		for _, c := range s.checks {
			s.srv.AddCheck(c.Name, c.Func)
		}
	}
}

// watchService stops the run (stopRun) when the embedded task service, if
// there is one, stops serving on its own, and sends why on the channel it
// returns.
func (s *serving) watchService(runCtx context.Context, stopRun context.CancelFunc) <-chan error {
	lost := make(chan error, 1)
	if s.service == nil {
		return lost
	}
	go func() {
		select {
		case <-s.service.Done():
			if err := s.service.Err(); err != nil {
				s.log.Error("the embedded task service stopped serving; shutting down", "err", err)
				lost <- err
				stopRun()
			}
		case <-runCtx.Done():
		}
	}()
	return lost
}

// connected reports whether nc is connected now.
func connected(nc *nats.Conn) error {
	if s := nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("NATS connection %s", s)
	}
	return nil
}
