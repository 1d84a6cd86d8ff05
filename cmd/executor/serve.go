package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/ops"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

const serveHelp = `serve [--server URLS | --embedded] (--trusted-approvers FILE | --insecure-allow-unsigned)
      [--data DIR] [--listen HOST:PORT] [--concurrency N] [--replicas N] [--http HOST:PORT]

Approvals must be signed by a reviewer named in --trusted-approvers (checks signature and
expiry); --insecure-allow-unsigned also accepts unsigned ones and says so loudly in the log.

Consumes the APPROVALS stream through the shared durable consumer "executor". For each
delivery: strict parse and gate, call the task service (keyed by intent id), store the
receipt, then ack. Streams and the consumer are created at start if missing (unless
--no-provision), retrying until JetStream answers or --wait-jetstream runs out.

With --embedded, also runs a NATS server with JetStream (store under --data, fsync before
every ack) listening on --listen, and the fake task service (Pebble under --data), so one
command runs everything. More instances join with: executor serve --server nats://HOST:PORT
Only one process may use a --data directory: a second is refused before it starts anything.

On a JetStream cluster, give every node's URL, comma-separated, and --replicas 3: the
streams and the consumer are then kept on three nodes and survive the loss of one.

With --http, serves /metrics (Prometheus), /healthz (liveness) and /readyz (ready when
connected to NATS, bound to the consumer and, with --embedded, the task service's store is
open) on that address.

SIGINT/SIGTERM stops pulling, finishes the deliveries in flight, drains the connection and
exits; a second signal exits at once. SIGHUP reloads --trusted-approvers (logging the
approvers added and removed; a file that does not load keeps the approvers loaded before).`

// consumerPollInterval is how often the consumer's lag is read for
// /metrics.
const consumerPollInterval = 5 * time.Second

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", serveHelp, stderr)
	conn := cli.ConnFlags(fs)
	emb := fs.Bool("embedded", false, "run a NATS server and the task service in this process")
	data := fs.String("data", "sendtwice-data", "`DIR` for the embedded server's JetStream store and the task service's Pebble store")
	listen := fs.String("listen", "127.0.0.1:4222", "`HOST:PORT` the embedded NATS server listens on")
	allowFaults := fs.Bool("allow-faults", false, "embedded task service: accept fault-switch calls (tests and demos only)")
	conc := fs.Int("concurrency", 512, "deliveries handled at once by this instance")
	id := fs.String("id", "", "instance `ID` named in receipts (default host-pid)")
	callTimeout := fs.Duration("call-timeout", 5*time.Second, "how long one call to the task service may take")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "consumer AckWait: a delivery not acked in this time comes back (the retry delay after an executor died)")
	maxDeliver := fs.Int("max-deliver", 5, "deliveries that may try a message before it is dead-lettered, counted by the executors\n(the consumer itself never drops a message; with --no-provision, the provisioned consumer's budget applies)")
	replicas := fs.Int("replicas", 0, "`N` copies of each stream and of the consumer, 1 to 5: 3 on a three-node cluster\n(default: as the existing streams have it, else 1; always 1 with --embedded)")
	noProvision := fs.Bool("no-provision", false, "bind to the existing consumer; never create or change streams (for a user without JetStream admin rights)")
	waitJS := fs.Duration("wait-jetstream", 2*time.Minute, "at start, keep trying this long to reach JetStream and set up or find the streams")
	httpAddr := fs.String("http", "", "serve /metrics, /healthz and /readyz on `HOST:PORT` (default off)")
	trusted := fs.String("trusted-approvers", "", "`FILE` naming the reviewers whose signed approvals are accepted (made by publisher keygen --trusted)")
	insecure := fs.Bool("insecure-allow-unsigned", false, "INSECURE: also accept unsigned approvals (for trying things out; anyone who can publish can then approve)")
	maxBytes := maxBytesFlag(fs)
	maxLifetime := fs.Duration("max-approval-lifetime", gate.DefaultMaxLifetime, "refuse signed approvals valid for longer than this (not_after - approved_at)")
	recordCalls := fs.String("record-calls", "", "record every task service call for a linearizability check: append its invocation (before the call)\nand its response (after) to `FILE` as JSON lines; one FILE per instance")
	checkOnly := fs.Bool("check-config", false, "check the flags and the files they name (trusted approvers, credentials, TLS), then exit 0\nwithout opening anything: no connection, no listener, no data directory")
	var faults []executor.FaultSpec
	fs.Func("fault", "inject a fault, for tests only: `POINT[@INTENT_ID]:ACTION[:PROBABILITY]`, POINT taken, after-call, after-receipt\nor before-ack, ACTION kill or stall=DURATION; without a probability it fires once, or with @INTENT_ID\non every delivery of that intent (repeatable)", func(s string) error {
		f, err := executor.ParseFault(s)
		faults = append(faults, f)
		return err
	})
	tsf := taskServiceFlagsVar(fs)
	logFormat, logLevel := cli.LogFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := tsf.check(); err != nil {
		return err
	}
	replicasSet := false
	fs.Visit(func(f *flag.Flag) { replicasSet = replicasSet || f.Name == "replicas" })
	if *conc < 1 || *conc > 4096 {
		return fmt.Errorf("%w: --concurrency %d: want 1 to 4096", errUsage, *conc)
	}
	if *maxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", errUsage, *maxDeliver)
	}
	if err := checkMaxBytes(*maxBytes); err != nil {
		return err
	}
	if replicasSet && (*replicas < 1 || *replicas > 5) {
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", errUsage, *replicas)
	}
	if *emb && *replicas > 1 {
		return fmt.Errorf("%w: --replicas %d with --embedded: the embedded server is a single node; run a cluster for replicas", errUsage, *replicas)
	}
	var host string
	var port int
	if *emb {
		*replicas = 1
		h, portStr, err := net.SplitHostPort(*listen)
		if err != nil {
			return fmt.Errorf("%w: --listen %q: %v", errUsage, *listen, err)
		}
		if port, err = strconv.Atoi(portStr); err != nil {
			return fmt.Errorf("%w: --listen %q: port must be a number", errUsage, *listen)
		}
		host = h
	}
	log, err := cli.NewLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	if len(faults) > 0 {
		log.Warn("FAULT INJECTION IS ON: this instance will crash or stall on purpose", "faults", len(faults))
	}
	if *trusted == "" && !*insecure {
		fs.Usage()
		return fmt.Errorf("%w: give --trusted-approvers FILE (from publisher keygen --trusted), or --insecure-allow-unsigned to accept unsigned approvals", errUsage)
	}
	if *maxLifetime <= 0 {
		return fmt.Errorf("%w: --max-approval-lifetime must be positive", errUsage)
	}
	checker := &gate.Checker{AllowUnsigned: *insecure, MaxLifetime: *maxLifetime}
	if *trusted != "" {
		if checker.Keys, err = sign.LoadTrusted(*trusted); err != nil {
			return err
		}
		log.Info("signed approvals accepted from trusted approvers", "file", *trusted, "approvers", checker.Keys.Len())
		defer reloadTrustedOnHangup(*trusted, checker.Keys, log)()
	}
	if *insecure {
		log.Warn("INSECURE: unsigned approvals are accepted; anyone allowed to publish approvals can approve (--insecure-allow-unsigned)")
	}
	if *checkOnly {
		return checkConfig(log, conn, *httpAddr)
	}

	reg := metrics.NewRegistry()
	em, err := metrics.NewExecutor(reg)
	if err != nil {
		return err
	}
	lag, err := metrics.NewConsumer(reg)
	if err != nil {
		return err
	}
	srv, closeOps, err := ops.Start(ctx, *httpAddr, reg, log)
	if err != nil {
		return err
	}
	defer closeOps()
	var checks []ops.Check
	// service is the embedded task service, when there is one: if it stops
	// serving on its own (its lease taken by another instance), this
	// process stops too, rather than run executors against no service.
	var service *provider.Service

	if *emb {
		st, err := embedded.StartStack(embedded.StackOptions{Dir: *data, Host: host, Port: port, AllowFaults: *allowFaults, Logger: log})
		if err != nil {
			return err
		}
		// The metrics and the readiness check see the store through open,
		// which is cleared before the stack closes it.
		var open atomic.Pointer[provider.Store]
		open.Store(st.Store)
		service = st.Service
		defer func() {
			open.Store(nil)
			if err := st.Close(); err != nil {
				log.Warn("stopping the embedded server", "err", err)
			}
		}()
		conn.Server = st.URL()
		log.Info("embedded NATS server and task service running", "url", conn.Server, "data", st.Dir(),
			"store_id", st.Store.ID(), "sync", "always")
		if err := metrics.RegisterService(reg, func() (provider.Counts, bool) {
			if s := open.Load(); s != nil {
				return s.Stats(), true
			}
			return provider.Counts{}, false
		}); err != nil {
			return err
		}
		checks = append(checks, ops.Check{Name: "store", Func: func(context.Context) error {
			if open.Load() == nil {
				return errors.New("the task service's store is closed")
			}
			return nil
		}})
	}

	nc, err := conn.Connect("executor", log)
	if err != nil {
		return err
	}
	checks = append(checks, ops.Check{Name: "nats", Func: func(context.Context) error { return connected(nc) }})
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	topo := topology.Config{AckWait: *ackWait, MaxDeliver: *maxDeliver, Replicas: *replicas, MaxBytes: *maxBytes}
	topo, err = awaitJetStream(ctx, js, topo, *noProvision, replicasSet, *waitJS, log)
	if err != nil || ctx.Err() != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	svc, err := tsf.open(ctx, func() (*nats.Conn, error) { return nc, nil }, *callTimeout)
	if err != nil {
		nc.Close()
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Warn("closing the task service", "err", err)
		}
	}()
	log.Info("task service", "name", svc.Name, "key_scope", svc.Scope)
	taskService, closeRecord, err := recordTaskService(*recordCalls, svc.Service, log)
	if err != nil {
		nc.Close()
		return err
	}
	defer closeRecord()
	ex, err := executor.New(nc, executor.Config{
		ID:          *id,
		TaskService: taskService,
		Concurrency: *conc,
		CallTimeout: *callTimeout,
		Topology:    topo,
		Logger:      log,
		Fault:       executor.Faults(faults, log),
		NoProvision: *noProvision,
		Gate:        checker,
		OnReceipt:   em.ObserveReceipt,
		OnRetry:     em.ObserveRetry,
	})
	if err != nil {
		nc.Close()
		return err
	}
	bound := make(chan struct{})
	checks = append(checks, ops.Check{Name: "consumer", Func: func(ctx context.Context) error {
		select {
		case <-bound:
		default:
			return errors.New("not yet bound to the consumer")
		}
		if lag.Err() == nil {
			return nil
		}
		return lag.Read(ctx, js)
	}})
	if srv != nil {
		for _, c := range checks {
			srv.AddCheck(c.Name, c.Func)
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go lag.Watch(watchCtx, js, consumerPollInterval)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	serviceLost := make(chan error, 1)
	if service != nil {
		go func() {
			select {
			case <-service.Done():
				if err := service.Err(); err != nil {
					log.Error("the embedded task service stopped serving; shutting down", "err", err)
					serviceLost <- err
					stopRun()
				}
			case <-runCtx.Done():
			}
		}()
	}
	runErr := ex.Run(runCtx, bound)
	stopWatch()
	select {
	case err := <-serviceLost:
		runErr = errors.Join(runErr, fmt.Errorf("serve: the embedded task service stopped serving: %w", err))
	default:
	}
	if err := drain(nc); err != nil {
		log.Warn("draining the connection", "err", err)
	}
	return runErr
}

// connected reports whether nc is connected now.
func connected(nc *nats.Conn) error {
	if s := nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("NATS connection %s", s)
	}
	return nil
}

// awaitJetStream sets up the streams and the consumer (or, with
// noProvision, finds the consumer), retrying while JetStream does not answer
// yet: a cluster that is still electing its leaders, or a node that is not up
// yet. It returns the topology with the replicas settled: when not given,
// those of the existing streams, else 1.
func awaitJetStream(ctx context.Context, js jetstream.JetStream, topo topology.Config, noProvision, replicasSet bool, wait time.Duration, log *slog.Logger) (topology.Config, error) {
	deadline := time.Now().Add(wait)
	delay := 250 * time.Millisecond
	for {
		resolved, err := setUp(ctx, js, topo, noProvision, replicasSet, log)
		if err == nil {
			return resolved, nil
		}
		if ctx.Err() != nil {
			return topo, ctx.Err()
		}
		if time.Now().After(deadline) {
			return topo, fmt.Errorf("JetStream not ready after %s: %w", wait, err)
		}
		log.Warn("JetStream not ready; trying again", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return topo, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func setUp(ctx context.Context, js jetstream.JetStream, topo topology.Config, noProvision, replicasSet bool, log *slog.Logger) (topology.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if noProvision {
		if replicasSet {
			log.Warn("--replicas is ignored with --no-provision: the streams are as provisioned")
		}
		if _, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer); err != nil {
			return topo, fmt.Errorf("finding consumer %s on %s: %w", topology.Consumer, topology.ApprovalsStream, err)
		}
		return topo, nil
	}
	existing := 0
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	switch {
	case err == nil:
		existing = s.CachedInfo().Config.Replicas
	case errors.Is(err, jetstream.ErrStreamNotFound):
	default:
		return topo, fmt.Errorf("reading stream %s: %w", topology.ApprovalsStream, err)
	}
	switch {
	case topo.Replicas == 0 && existing > 0:
		topo.Replicas = existing
	case topo.Replicas == 0:
		topo.Replicas = 1
	case existing > 0 && existing != topo.Replicas:
		log.Warn("changing the replicas of the streams and the consumer", "from", existing, "to", topo.Replicas)
	}
	if _, err := topology.Ensure(ctx, js, topo); err != nil {
		return topo, err
	}
	log.Info("streams and consumer ready", "replicas", topo.Replicas)
	return topo, nil
}
