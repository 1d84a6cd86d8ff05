package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/ops"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/service"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

const serveHelp = `serve [--server URLS | --embedded] (--trusted-approvers FILE | --insecure-allow-unsigned)
      [--data DIR] [--listen HOST:PORT] [--concurrency N] [--replicas N] [--http HOST:PORT]
      [--key-clock-allowance D] [--key-margin D] [--records-retention D] [--compact-every D]
      [--metrics-max-scopes N] [--task-service SERVICE]

Approvals must be signed by a reviewer named in --trusted-approvers (checks signature and
expiry); --insecure-allow-unsigned also accepts unsigned ones and says so loudly in the log.

Consumes the APPROVALS stream through the shared durable consumer "executor". For each
delivery: strict parse and gate, call the task service (keyed by intent id), store the
receipt, then ack. Streams and the consumer are created at start if missing (unless
--no-provision), retrying until JetStream answers or --wait-jetstream runs out.

With --embedded, also runs a NATS server with JetStream (store under --data, fsync before
every ack) listening on --listen, and the fake task service (Pebble under --data), so one
command runs everything; with another --task-service (caldav, redmine) the fake service is not
started and its store is neither opened nor made. More instances join with:
executor serve --server nats://HOST:PORT
Only one process may use a --data directory: a second is refused before it starts anything.
--embedded connects to its own server: --server, credentials and TLS flags are refused with
it, and $NATS_URL, $NATS_USER and the other NATS variables of the environment are not used.
The embedded task service takes the flags of provider serve, with the same names and defaults:
a key is kept until the latest not_after seen for it plus --key-clock-allowance and
--key-margin, expired keys are compacted every --compact-every, request and create records are
removed after --records-retention (0: kept forever), and /metrics shows at most
--metrics-max-scopes scope labels (the other scopes summed under scope="_other"). Without
--embedded these flags are refused: they belong to provider serve there; with another
--task-service they are refused too, as is --allow-faults: no fake service runs to take them.

On a JetStream cluster, give every node's URL, comma-separated, and --replicas 3: the
streams and the consumer are then kept on three nodes and survive the loss of one.

The executors' consumer is held to what provisioning applied (its record, kept in the bucket
sendtwice-topology): at start, and every --consumer-check while running, serve compares the
consumer with it. One that differs (another filter subject, budget, ack wait, back-off...,
changed by anyone but provisioning) is refused, naming each difference as "field: expected X,
found Y": at start serve exits 1 without consuming; while running it stops taking deliveries,
finishes those in flight, logs the differences at ERROR and exits 1, so that a restart meets the
same refusal until provisioning sets the consumer right again (executor provision). Without a
record (a deployment provisioned by an older version), the consumer is compared with what
serve's own flags provision.

--task-service chooses the task service the executor calls: fake (the default, over NATS),
caldav (--caldav-url, --caldav-user, --caldav-password-file or $` + service.CalDAVPasswordEnv + `) or redmine
(--redmine-url, --redmine-project, --redmine-field, --redmine-api-key-file or $` + service.RedmineAPIKeyEnv + `,
--redmine-lock-ttl). A service that forgets a key when its task is deleted (caldav, redmine)
is composed with the executors' intent ledger (the key-value bucket sendtwice-intents), which
remembers the key; redmine's per-key locks are kept there too, each living --redmine-lock-ttl
(default 2 × --call-timeout + 10s; one not longer than --call-timeout is refused). Before the
first delivery serve reads the service once, creating nothing: a refused login, a missing
project or, for Redmine, a missing key field stops it with the reason. It then records which
service it calls and where (the kind, the collection URLs or the Redmine URL, project and
field, the user; never a password or an API key) in the bucket sendtwice-topology, key
task-service: executor status and executor verify, run without task service flags, use it.

With --http, serves /metrics (Prometheus), /healthz (liveness) and /readyz (ready when
connected to NATS, bound to the consumer and, with --embedded, the task service's store is
open) on that address.

SIGINT/SIGTERM stops pulling, finishes the deliveries in flight, drains the connection and
exits; a second signal exits at once. SIGHUP reloads --trusted-approvers (logging the
approvers added and removed; a file that does not load keeps the approvers loaded before).`

// consumerPollInterval is how often the consumer's lag is read for
// /metrics.
const consumerPollInterval = 5 * time.Second

// serveFlags are serve's flags, as given.
type serveFlags struct {
	fs          *flag.FlagSet
	conn        *cli.ConnConfig
	embedded    *bool
	data        *string
	listen      *string
	allowFaults *bool
	conc        *int
	id          *string
	callTimeout *time.Duration
	ackWait     *time.Duration
	maxDeliver  *int
	replicas    *int
	noProvision *bool
	waitJS      *time.Duration
	httpAddr    *string
	trusted     *string
	insecure    *bool
	maxBytes    *int64
	maxLifetime *time.Duration
	recordCalls *string
	checkOnly   *bool
	// The embedded task service's key lifetime, records retention,
	// compaction period and metric label bound (provider serve's flags).
	keyAllowance *time.Duration
	keyMargin    *time.Duration
	retention    *time.Duration
	compactEvery *time.Duration
	maxScopes    *int
	consCheck    *time.Duration
	faults       []executor.FaultSpec
	tsf          *service.Config
	logFormat    *string
	logLevel     *string

	// Settled by check.
	replicasSet bool
	host        string // the embedded server's, with --embedded
	port        int
	// envConnIgnored: with --embedded, credentials or TLS settings from the
	// environment were left out of the connection.
	envConnIgnored bool
}

// newServeFlags defines serve's flags on a flag set of its own.
func newServeFlags(stderr io.Writer) *serveFlags {
	fs := newFlagSet("serve", serveHelp, stderr)
	f := &serveFlags{fs: fs}
	f.conn = cli.ConnFlags(fs)
	f.embedded = fs.Bool("embedded", false, "run a NATS server and the task service in this process")
	f.data = fs.String("data", "sendtwice-data", "`DIR` for the embedded server's JetStream store and the task service's Pebble store")
	f.listen = fs.String("listen", "127.0.0.1:4222", "`HOST:PORT` the embedded NATS server listens on")
	f.allowFaults = fs.Bool("allow-faults", false, "embedded task service: accept fault-switch calls (tests and demos only)")
	f.keyAllowance = fs.Duration("key-clock-allowance", provider.DefaultKeyClockAllowance, "embedded task service: how far the executors' clocks may run behind the service's: added to a key's latest not_after")
	f.keyMargin = fs.Duration("key-margin", provider.DefaultKeyMargin, "embedded task service: added on top of the clock allowance before a key is compacted")
	f.retention = fs.Duration("records-retention", 0, "embedded task service: remove request and create records older than this (0: keep them forever)")
	f.compactEvery = fs.Duration("compact-every", provider.DefaultCompactEvery, "embedded task service: how often expired keys and records are compacted")
	f.maxScopes = fs.Int("metrics-max-scopes", metrics.DefaultMaxScopeLabels, "embedded task service: `N` scope labels at most on /metrics; the other scopes are summed under scope=\"_other\"")
	f.conc = fs.Int("concurrency", 512, "deliveries handled at once by this instance")
	f.id = fs.String("id", "", "instance `ID` named in receipts (default host-pid)")
	f.callTimeout = fs.Duration("call-timeout", 5*time.Second, "how long one call to the task service may take")
	f.ackWait = fs.Duration("ack-wait", 30*time.Second, "consumer AckWait: a delivery not acked in this time comes back (the retry delay after an executor died)")
	f.maxDeliver = fs.Int("max-deliver", 5, "deliveries that may try a message before it is dead-lettered, counted by the executors\n(the consumer itself never drops a message; with --no-provision, the provisioned consumer's budget applies)")
	f.replicas = fs.Int("replicas", 0, "`N` copies of each stream and of the consumer, 1 to 5: 3 on a three-node cluster\n(default: as the existing streams have it, else 1; always 1 with --embedded)")
	f.noProvision = fs.Bool("no-provision", false, "bind to the existing consumer; never create or change streams (for a user without JetStream admin rights)")
	f.waitJS = fs.Duration("wait-jetstream", 2*time.Minute, "at start, keep trying this long to reach JetStream and set up or find the streams")
	f.consCheck = fs.Duration("consumer-check", executor.DefaultConsumerCheckInterval, "compare the consumer with what provisioning applied this often while running;\none that differs stops serve (it is also compared at start)")
	f.httpAddr = fs.String("http", "", "serve /metrics, /healthz and /readyz on `HOST:PORT` (default off)")
	f.trusted = fs.String("trusted-approvers", "", "`FILE` naming the reviewers whose signed approvals are accepted (made by publisher keygen --trusted)")
	f.insecure = fs.Bool("insecure-allow-unsigned", false, "INSECURE: also accept unsigned approvals (for trying things out; anyone who can publish can then approve)")
	f.maxBytes = maxBytesFlag(fs)
	f.maxLifetime = fs.Duration("max-approval-lifetime", gate.DefaultMaxLifetime, "refuse signed approvals valid for longer than this (not_after - approved_at)")
	f.recordCalls = fs.String("record-calls", "", "record every task service call for a linearizability check: append its invocation (before the call)\nand its response (after) to `FILE` as JSON lines; one FILE per instance")
	f.checkOnly = fs.Bool("check-config", false, "check the flags and the files they name (trusted approvers, credentials, TLS), then exit 0\nwithout opening anything: no connection, no listener, no data directory")
	fs.Func("fault", "inject a fault, for tests only: `POINT[@INTENT_ID]:ACTION[:PROBABILITY]`, POINT taken, after-call, after-receipt\nor before-ack, ACTION kill or stall=DURATION; without a probability it fires once, or with @INTENT_ID\non every delivery of that intent (repeatable)", func(s string) error {
		spec, err := executor.ParseFault(s)
		f.faults = append(f.faults, spec)
		return err
	})
	f.tsf = service.FlagsVar(fs)
	f.logFormat, f.logLevel = cli.LogFlags(fs)
	return f
}

// parseServeFlags parses and checks serve's command line.
func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := newServeFlags(stderr)
	if err := parse(f.fs, args); err != nil {
		return nil, err
	}
	if err := f.tsf.Check(); err != nil {
		return nil, err
	}
	if err := f.tsf.CheckCallTimeout(*f.callTimeout); err != nil {
		return nil, err
	}
	return f, f.check()
}

// check refuses values serve cannot run with, and settles the replicas and
// the embedded server's address.
func (f *serveFlags) check() error {
	f.fs.Visit(func(fl *flag.Flag) { f.replicasSet = f.replicasSet || fl.Name == "replicas" })
	if *f.conc < 1 || *f.conc > 4096 {
		return fmt.Errorf("%w: --concurrency %d: want 1 to 4096", errUsage, *f.conc)
	}
	if *f.maxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", errUsage, *f.maxDeliver)
	}
	if *f.consCheck < time.Second {
		return fmt.Errorf("%w: --consumer-check %s: want at least 1s", errUsage, *f.consCheck)
	}
	if err := checkMaxBytes(*f.maxBytes); err != nil {
		return err
	}
	if f.replicasSet && (*f.replicas < 1 || *f.replicas > 5) {
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", errUsage, *f.replicas)
	}
	if *f.embedded && *f.replicas > 1 {
		return fmt.Errorf("%w: --replicas %d with --embedded: the embedded server is a single node; run a cluster for replicas", errUsage, *f.replicas)
	}
	if err := f.checkServiceFlags(); err != nil {
		return err
	}
	if !*f.embedded {
		return nil
	}
	if err := f.checkEmbeddedConn(); err != nil {
		return err
	}
	*f.replicas = 1
	h, portStr, err := net.SplitHostPort(*f.listen)
	if err != nil {
		return fmt.Errorf("%w: --listen %q: %v", errUsage, *f.listen, err)
	}
	if f.port, err = strconv.Atoi(portStr); err != nil {
		return fmt.Errorf("%w: --listen %q: port must be a number", errUsage, *f.listen)
	}
	f.host = h
	// The executor connects to its own server, which has neither
	// authentication nor TLS: connection settings taken from the environment
	// ($NATS_URL, $NATS_USER, $NATS_CA and the others) are for --server and
	// are left out (given as flags, they were refused above). The address
	// stands in until the server runs and names its own.
	f.envConnIgnored = f.conn.Creds != "" || f.conn.NKey != "" || f.conn.User != "" || f.conn.Password != "" ||
		f.conn.TLSCert != "" || f.conn.TLSKey != "" || f.conn.TLSCA != ""
	connectHost := h
	if connectHost == "" || net.ParseIP(connectHost).IsUnspecified() {
		connectHost = "127.0.0.1"
	}
	*f.conn = cli.ConnConfig{Server: "nats://" + net.JoinHostPort(connectHost, portStr), InboxPrefix: f.conn.InboxPrefix}
	return nil
}

// serviceFlags are the embedded task service's flags, provider serve's.
var serviceFlags = []string{"key-clock-allowance", "key-margin", "records-retention", "compact-every", "metrics-max-scopes"}

// checkServiceFlags refuses the embedded task service's flags without
// --embedded (no service runs here to take them) and the values provider
// serve refuses.
func (f *serveFlags) checkServiceFlags() error {
	if !*f.embedded {
		var given []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(serviceFlags, fl.Name) {
				given = append(given, "--"+fl.Name)
			}
		})
		if len(given) > 0 {
			return fmt.Errorf("%w: %s without --embedded: these configure the embedded task service; give them to provider serve where the service runs", errUsage, strings.Join(given, ", "))
		}
		return nil
	}
	if f.tsf.Kind != service.KindFake {
		var given []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(serviceFlags, fl.Name) || fl.Name == "allow-faults" {
				given = append(given, "--"+fl.Name)
			}
		})
		if len(given) > 0 {
			return fmt.Errorf("%w: %s with --task-service %s: these configure the embedded fake task service, which is not started when the executors call another", errUsage, strings.Join(given, ", "), f.tsf.Kind)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"key-clock-allowance", *f.keyAllowance}, {"key-margin", *f.keyMargin}, {"records-retention", *f.retention}} {
		if d.v < 0 {
			return fmt.Errorf("%w: --%s %v: must not be negative", errUsage, d.name, d.v)
		}
	}
	if *f.compactEvery <= 0 {
		return fmt.Errorf("%w: --compact-every %v: must be positive", errUsage, *f.compactEvery)
	}
	if *f.maxScopes < 1 {
		return fmt.Errorf("%w: --metrics-max-scopes %d: want at least 1", errUsage, *f.maxScopes)
	}
	return nil
}

// noneIfZero maps a lifetime flag's 0 (none) to the store's "none"
// (negative); the store reads 0 as its default.
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// embeddedConflicts are the connection flags that make no sense with
// --embedded: where to connect and how to authenticate or encrypt. Only
// --inbox-prefix goes with it.
var embeddedConflicts = append([]string{"server"}, cli.AuthFlagNames...)

// checkEmbeddedConn refuses connection flags given with --embedded, which
// would otherwise be ignored without a word: the executor connects to the
// server it starts itself.
func (f *serveFlags) checkEmbeddedConn() error {
	var given []string
	f.fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(embeddedConflicts, fl.Name) {
			given = append(given, "--"+fl.Name)
		}
	})
	switch {
	case len(given) == 0:
		return nil
	case slices.Contains(given, "--server"):
		return fmt.Errorf("%w: --embedded with --server: --embedded runs a NATS server in this process and connects to it; to join a running server, leave out --embedded", errUsage)
	default:
		return fmt.Errorf("%w: --embedded with %s: the embedded NATS server takes no credentials and no TLS; these flags go with --server", errUsage, strings.Join(given, ", "))
	}
}

// gate builds the gate's policy from the flags and, with
// --trusted-approvers, reloads the approvers on SIGHUP until the returned
// stop is called.
func (f *serveFlags) gate(log *slog.Logger) (checker *gate.Checker, stop func(), err error) {
	stop = func() {}
	if len(f.faults) > 0 {
		log.Warn("FAULT INJECTION IS ON: this instance will crash or stall on purpose", "faults", len(f.faults))
	}
	if *f.trusted == "" && !*f.insecure {
		f.fs.Usage()
		return nil, stop, fmt.Errorf("%w: give --trusted-approvers FILE (from publisher keygen --trusted), or --insecure-allow-unsigned to accept unsigned approvals", errUsage)
	}
	if *f.maxLifetime <= 0 {
		return nil, stop, fmt.Errorf("%w: --max-approval-lifetime must be positive", errUsage)
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
	f       *serveFlags
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

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
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
	st, err := embedded.StartStack(embedded.StackOptions{Dir: *f.data, Host: f.host, Port: f.port, AllowFaults: *f.allowFaults, Logger: s.log,
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
// with --record-calls) and makes the executor.
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
	taskService, closeRecord, err := recordTaskService(*f.recordCalls, svc.Service, s.log)
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
		Fault:       executor.Faults(f.faults, s.log),
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
