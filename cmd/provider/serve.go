package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/cmd/internal/ops"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// serveHelp explains serve in its --help.
const serveHelp = `Runs the fake task service on NATS, with its state in the Pebble database
in DIR (created if missing), until SIGINT or SIGTERM. Then it stops taking
calls, answers the calls it took, drains the NATS connection and closes the
database. A second signal exits at once. On a cluster, give every node's
URL, comma-separated.

With --http it serves /metrics (Prometheus: the three counters as the
gauges sendtwice_requests_received, sendtwice_creates_executed and
sendtwice_tasks_existing; the same per scope as sendtwice_scope_*{scope},
with at most --metrics-max-scopes scope labels and every other scope summed
under scope="_other"; sendtwice_keys_live, sendtwice_keys_compacted and
sendtwice_tasks_deleted),
/healthz (liveness) and /readyz (ready when
connected to NATS, the service is registered and the store is open).

Only one process may serve one DIR, and only one store may answer on one
NATS deployment, for the life of the deployment. The first start on a
deployment adopts its store: the store's id is recorded, without a TTL
(key "adopted" in the JetStream key-value bucket fake-task-provider-store).
serve refuses every other store while that record stands, whether or not
the adopted store's instance is alive, naming the adopted store and where
it was adopted; only provider adopt replaces it. Before it joins, serve
also pings the service's instances and takes a lease (key "lease" in the
bucket fake-task-provider-lease, renewed every third of --lease-ttl): it
refuses to start, naming the other instance, while another instance answers
or holds the lease. A restart on the same DIR, or on a copy of it, takes
the lease over at once. If another instance takes the lease, or another
store is adopted, while this one runs, this one stops serving and exits
with an error.

A key (scope, intent id) is kept until the latest not_after of every
approval the service has seen for it, plus --key-clock-allowance (the
executors' clocks may run behind the service's by this much) and
--key-margin; a key whose approvals never expire is kept forever. Every
--compact-every the service removes expired keys in the background, in
small batches between the create calls; tasks are never removed. Request
and create records are removed after --records-retention (0: kept
forever); tasks, delete records, keys and counters are kept regardless.
`

// serveFlags are serve's flags.
type serveFlags struct {
	*common
	data, httpAddr, cpuProfile   *string
	allowFaults, checkOnly       *bool
	leaseTTL                     *time.Duration
	allowance, margin, retention *time.Duration
	compactEvery                 *time.Duration
	leaseReplicas, maxScopes     *int
}

func (c *app) serveFlags(fs *flag.FlagSet) *serveFlags {
	return &serveFlags{
		common:        c.commonFlags(fs),
		data:          fs.String("data", "", "the `DIR` of the Pebble database (required)"),
		allowFaults:   allowFaultsFlag(fs),
		httpAddr:      fs.String("http", "", "serve /metrics, /healthz and /readyz on `HOST:PORT` (default off)"),
		leaseTTL:      fs.Duration("lease-ttl", provider.DefaultLeaseTTL, "how long the lease outlives an instance that dies without stopping, when serve creates the lease bucket"),
		leaseReplicas: fs.Int("lease-replicas", 1, "`N` copies of the lease and adoption buckets when serve creates them: 3 on a three-node cluster"),
		allowance:     fs.Duration("key-clock-allowance", provider.DefaultKeyClockAllowance, "how far the executors' clocks may run behind the service's: added to a key's latest not_after"),
		margin:        fs.Duration("key-margin", provider.DefaultKeyMargin, "added on top of the clock allowance before a key is compacted"),
		retention:     fs.Duration("records-retention", 0, "remove request and create records older than this (0: keep them forever)"),
		compactEvery:  fs.Duration("compact-every", provider.DefaultCompactEvery, "how often expired keys and records are compacted"),
		maxScopes:     fs.Int("metrics-max-scopes", metrics.DefaultMaxScopeLabels, "`N` scope labels at most on /metrics; the other scopes are summed under scope=\"_other\""),
		cpuProfile:    fs.String("cpuprofile", "", "write a CPU profile of the service to `FILE` until it stops"),
		checkOnly:     fs.Bool("check-config", false, "check the flags and the files they name (credentials, TLS), then exit 0 without\nopening anything: no connection, no listener, no database"),
	}
}

// allowFaultsFlag is --allow-faults where a test defines it; false in the
// production program, which has no such flag.
func allowFaultsFlag(fs *flag.FlagSet) *bool {
	if testOnly.allowFaults == nil {
		return new(bool)
	}
	return testOnly.allowFaults(fs)
}

// check refuses flags that cannot be served.
func (f *serveFlags) check() error {
	if *f.data == "" {
		return usageErr("serve: --data is required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"key-clock-allowance", *f.allowance}, {"key-margin", *f.margin}, {"records-retention", *f.retention}} {
		if d.v < 0 {
			return usageErr("serve: --%s %v: must not be negative", d.name, d.v)
		}
	}
	if *f.compactEvery <= 0 {
		return usageErr("serve: --compact-every %v: must be positive", *f.compactEvery)
	}
	if *f.maxScopes < 1 {
		return usageErr("serve: --metrics-max-scopes %d: want at least 1", *f.maxScopes)
	}
	if *f.leaseReplicas < 1 || *f.leaseReplicas > 5 {
		return usageErr("serve: --lease-replicas %d: want 1 to 5", *f.leaseReplicas)
	}
	return nil
}

func (c *app) serve(ctx context.Context, args []string) error {
	fs := c.flagSet("serve", "[--server URLS] --data DIR [--http HOST:PORT] [--key-clock-allowance D] [--key-margin D] [--records-retention D]",
		serveHelp)
	f := c.serveFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	log, err := f.logger(c.stderr)
	if err != nil {
		return err
	}
	if *f.checkOnly {
		return checkServeConfig(log, f.common, *f.httpAddr)
	}
	log.Info("garbage collector", "gogc", setServeGC(c.getenv("GOGC")))
	if *f.cpuProfile != "" {
		stopProfile, err := cli.StartCPUProfile(*f.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	return f.run(ctx, log)
}

// run hosts the service until ctx ends, the connection closes or the
// service stops serving on its own.
func (f *serveFlags) run(ctx context.Context, log *slog.Logger) error {
	reg := metrics.NewRegistry()
	srv, closeOps, err := ops.Start(ctx, *f.httpAddr, reg, log)
	if err != nil {
		return err
	}
	defer closeOps()
	closed := make(chan struct{})
	h, err := provider.Host(*f.data, provider.Options{Logger: log, KeyClockAllowance: noneIfZero(*f.allowance),
		KeyMargin: noneIfZero(*f.margin), RecordsRetention: *f.retention, CompactEvery: *f.compactEvery},
		provider.ServiceConfig{AllowFaults: *f.allowFaults, Logger: log, Version: version, LeaseTTL: *f.leaseTTL, LeaseReplicas: *f.leaseReplicas},
		func() (*nats.Conn, error) { return f.connectService(log, closed) })
	if err != nil {
		return err
	}
	if err := metrics.RegisterService(reg, func() (provider.Counts, bool) { return h.Store.Stats(), true }); err != nil {
		return errors.Join(err, h.Stop())
	}
	if err := metrics.RegisterServiceScopes(reg, *f.maxScopes, func() (provider.KeyCounts, []provider.ScopeCounts, bool) {
		keys, scopes := h.Store.KeyStats()
		return keys, scopes, true
	}); err != nil {
		return errors.Join(err, h.Stop())
	}
	if srv != nil {
		h.AddChecks(srv.AddCheck)
	}
	h.LogServing()
	runErr := awaitStop(ctx, log, closed, h.Service)
	err = h.Stop()
	counts := h.Store.Stats()
	log.Info("stopped", "requests_received", counts.RequestsReceived,
		"creates_executed", counts.CreatesExecuted, "tasks_existing", counts.TasksExisting)
	return errors.Join(runErr, err)
}

// noneIfZero maps a flag's 0 (none) to the store's "none" (negative); the
// store reads 0 as its default.
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// connectService connects the service to NATS, reconnecting without limit;
// closed is closed when the connection is.
func (cf *common) connectService(log *slog.Logger, closed chan<- struct{}) (*nats.Conn, error) {
	return cf.connect(provider.ServiceName, log, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
}

// awaitStop waits until ctx ends, the connection closes or the service stops
// serving on its own; the last two are errors.
func awaitStop(ctx context.Context, log *slog.Logger, closed <-chan struct{}, svc *provider.Service) error {
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case <-closed:
		log.Error("NATS connection closed; shutting down")
		return errors.New("NATS connection closed")
	case <-svc.Done():
		log.Error("stopped serving; shutting down", "err", svc.Err())
		return fmt.Errorf("serve: stopped serving: %w", svc.Err())
	}
}
