package serve

import (
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// Config are serve's flags, as given.
type Config struct {
	fs          *flag.FlagSet
	conn        *cli.ConnConfig
	configFile  *string
	embedded    *bool
	data        *string
	listen      *string
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
	checkOnly   *bool
	// The embedded task service's key lifetime, records retention,
	// compaction period and metric label bound (provider serve's flags).
	keyAllowance *time.Duration
	keyMargin    *time.Duration
	retention    *time.Duration
	compactEvery *time.Duration
	maxScopes    *int
	consCheck    *time.Duration
	tsf          *service.Config
	logFormat    *string
	logLevel     *string

	// Knobs are the settings only tests give; no flag of the program sets
	// them.
	Knobs Knobs

	// Settled by check.
	replicasSet bool
	host        string // the embedded server's, with --embedded
	port        int
	// envConnIgnored: with --embedded, credentials or TLS settings from the
	// environment were left out of the connection.
	envConnIgnored bool
}

// Knobs are what the tests of the programs set through flags of the test
// binary's own, to crash executors on purpose and check what they did;
// the program has no flag for them.
type Knobs struct {
	// Faults are injected into the executor (executor.Faults).
	Faults []executor.FaultSpec
	// RecordCalls names a file that every task service call is appended
	// to, for a linearizability check (history.Open).
	RecordCalls string
}

// FlagsVar defines serve's flags on fs, in groups by topic, and returns
// the configuration they fill in once fs is parsed.
func FlagsVar(fs *flag.FlagSet) *Config {
	f := &Config{fs: fs}
	f.approvalFlags(fs)
	f.embeddedFlags(fs)
	f.conn = cli.ConnFlags(fs)
	f.tsf = service.FlagsVar(fs)
	f.consumerFlags(fs)
	f.httpAddr = fs.String("http", "", "serve /metrics (Prometheus), /healthz (alive) and /readyz on `HOST:PORT` (default off);\n"+
		"ready when connected to NATS, bound to the consumer and, with --embedded, the task service's store is open")
	cli.Group(fs, "Observability", "http")
	f.logFormat, f.logLevel = cli.LogFlags(fs)
	f.configFile = fs.String("config", "", "read flags from `FILE`: one name = value a line, the name a flag's without dashes,\n"+
		"# comments; a value may be double-quoted; flags given on the command line win")
	f.checkOnly = fs.Bool("check-config", false, "check the flags, the --config file and the files they name (trusted approvers, credentials, TLS),\n"+
		"then exit 0 without opening anything: no connection, no listener, no data directory")
	cli.Group(fs, "Configuration", "config", "check-config")
	return f
}

// approvalFlags defines the flags of the gate's trust policy.
func (f *Config) approvalFlags(fs *flag.FlagSet) {
	f.trusted = fs.String("trusted-approvers", "", "`FILE` naming the reviewers whose signed approvals are accepted (made by publisher keygen --trusted);\n"+
		"signature and expiry are checked; SIGHUP reloads it (a file that does not load keeps the approvers loaded before)")
	f.insecure = fs.Bool("insecure-allow-unsigned", false, "INSECURE: also accept unsigned approvals, saying so in the log (for trying things out;\n"+
		"anyone who can publish can then approve)")
	f.maxLifetime = fs.Duration("max-approval-lifetime", gate.DefaultMaxLifetime, "refuse signed approvals valid for longer than this (not_after - approved_at)")
	cli.Group(fs, "Approvals (one of the first two is required)", "trusted-approvers", "insecure-allow-unsigned", "max-approval-lifetime")
}

// embeddedFlags defines --embedded and the flags of what it runs.
func (f *Config) embeddedFlags(fs *flag.FlagSet) {
	f.embedded = fs.Bool("embedded", false, "run a NATS server with JetStream and the fake task service in this process: one command runs everything;\n"+
		"more instances join with --server nats://HOST:PORT. It connects to its own server: --server, credentials\n"+
		"and TLS flags are refused, and the NATS variables of the environment are not used. With another\n"+
		"--task-service, the fake service is not started and its store neither opened nor made")
	f.data = fs.String("data", "sendtwice-data", "`DIR` for the embedded server's JetStream store (fsync before every ack) and the task service's\n"+
		"Pebble store; only one process may use it")
	f.listen = fs.String("listen", "127.0.0.1:4222", "`HOST:PORT` the embedded NATS server listens on")
	f.keyAllowance = fs.Duration("key-clock-allowance", provider.DefaultKeyClockAllowance, "how far the executors' clocks may run behind the service's: added to a key's latest not_after")
	f.keyMargin = fs.Duration("key-margin", provider.DefaultKeyMargin, "added on top of the clock allowance before a key is compacted")
	f.retention = fs.Duration("records-retention", 0, "remove request and create records older than this (0: keep them forever)")
	f.compactEvery = fs.Duration("compact-every", provider.DefaultCompactEvery, "how often expired keys and records are compacted")
	f.maxScopes = fs.Int("metrics-max-scopes", metrics.DefaultMaxScopeLabels, "`N` scope labels at most on /metrics; the other scopes are summed under scope=\"_other\"")
	cli.Group(fs, "Embedded server", "embedded", "data", "listen")
	cli.Group(fs, "Embedded task service (provider serve's flags; only with --embedded and the fake service)",
		serviceFlags...)
}

// consumerFlags defines the flags of the streams, the consumer and the
// deliveries.
func (f *Config) consumerFlags(fs *flag.FlagSet) {
	f.conc = fs.Int("concurrency", 512, "deliveries handled at once by this instance")
	f.id = fs.String("id", "", "instance `ID` named in receipts (default host-pid)")
	f.callTimeout = fs.Duration("call-timeout", 5*time.Second, "how long one call to the task service may take")
	f.ackWait = fs.Duration("ack-wait", 30*time.Second, "consumer AckWait: a delivery not acked in this time comes back (the retry delay after an executor died)")
	f.maxDeliver = fs.Int("max-deliver", 5, fmt.Sprintf("deliveries that may try a message before it is dead-lettered, counted by the executors\n(the consumer itself never drops a message; with --no-provision, the provisioned consumer's budget applies;\nup to %d deliveries the task service answers in doubt, each with an in_doubt receipt, are not counted)", executor.MaxInDoubtDeliveries))
	f.replicas = fs.Int("replicas", 0, "`N` copies of each stream and of the consumer, 1 to 5: on a cluster, give every node's URL to --server\n"+
		"and 3, to survive the loss of one node (default: as the existing streams have it, else 1; always 1 with --embedded)")
	f.maxBytes = MaxBytesFlag(fs)
	f.noProvision = fs.Bool("no-provision", false, "bind to the existing consumer; never create or change streams (for a user without JetStream admin rights)")
	f.waitJS = fs.Duration("wait-jetstream", 2*time.Minute, "at start, keep trying this long to reach JetStream and set up or find the streams")
	f.consCheck = fs.Duration("consumer-check", executor.DefaultConsumerCheckInterval, "compare the consumer with what provisioning applied (its record in the bucket sendtwice-topology)\n"+
		"at start and this often while running; one that differs, changed by anyone but provisioning, stops serve\n"+
		"naming each difference (at start before consuming; while running after the deliveries in flight),\n"+
		"until executor provision sets it right")
	cli.Group(fs, "Streams, consumer and deliveries", "concurrency", "call-timeout", "ack-wait", "max-deliver", "replicas", "max-bytes",
		"no-provision", "wait-jetstream", "consumer-check", "id")
}

// settle takes the flags of the --config file that the command line left
// out, then checks them: the task service's, then serve's own.
func (f *Config) settle() error {
	if err := cli.ApplyConfigFile(f.fs, *f.configFile); err != nil {
		return fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	if err := f.tsf.Check(); err != nil {
		return err
	}
	if err := f.tsf.CheckCallTimeout(*f.callTimeout); err != nil {
		return err
	}
	return f.check()
}

// check refuses values serve cannot run with, and settles the replicas and
// the embedded server's address.
func (f *Config) check() error {
	f.fs.Visit(func(fl *flag.Flag) { f.replicasSet = f.replicasSet || fl.Name == "replicas" })
	if *f.conc < 1 || *f.conc > 4096 {
		return fmt.Errorf("%w: --concurrency %d: want 1 to 4096", cli.ErrUsage, *f.conc)
	}
	if *f.maxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", cli.ErrUsage, *f.maxDeliver)
	}
	if *f.consCheck < time.Second {
		return fmt.Errorf("%w: --consumer-check %s: want at least 1s", cli.ErrUsage, *f.consCheck)
	}
	if err := CheckMaxBytes(*f.maxBytes); err != nil {
		return err
	}
	if f.replicasSet && (*f.replicas < 1 || *f.replicas > 5) {
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", cli.ErrUsage, *f.replicas)
	}
	if *f.embedded && *f.replicas > 1 {
		return fmt.Errorf("%w: --replicas %d with --embedded: the embedded server is a single node; run a cluster for replicas", cli.ErrUsage, *f.replicas)
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
		return fmt.Errorf("%w: --listen %q: %v", cli.ErrUsage, *f.listen, err)
	}
	if f.port, err = strconv.Atoi(portStr); err != nil {
		return fmt.Errorf("%w: --listen %q: port must be a number", cli.ErrUsage, *f.listen)
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
func (f *Config) checkServiceFlags() error {
	if !*f.embedded {
		var given []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(serviceFlags, fl.Name) {
				given = append(given, "--"+fl.Name)
			}
		})
		if len(given) > 0 {
			return fmt.Errorf("%w: %s without --embedded: these configure the embedded task service; give them to provider serve where the service runs", cli.ErrUsage, strings.Join(given, ", "))
		}
		return nil
	}
	if f.tsf.Kind != service.KindFake {
		var given []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(serviceFlags, fl.Name) {
				given = append(given, "--"+fl.Name)
			}
		})
		if len(given) > 0 {
			return fmt.Errorf("%w: %s with --task-service %s: these configure the embedded fake task service, which is not started when the executors call another", cli.ErrUsage, strings.Join(given, ", "), f.tsf.Kind)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"key-clock-allowance", *f.keyAllowance}, {"key-margin", *f.keyMargin}, {"records-retention", *f.retention}} {
		if d.v < 0 {
			return fmt.Errorf("%w: --%s %v: must not be negative", cli.ErrUsage, d.name, d.v)
		}
	}
	if *f.compactEvery <= 0 {
		return fmt.Errorf("%w: --compact-every %v: must be positive", cli.ErrUsage, *f.compactEvery)
	}
	if *f.maxScopes < 1 {
		return fmt.Errorf("%w: --metrics-max-scopes %d: want at least 1", cli.ErrUsage, *f.maxScopes)
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
func (f *Config) checkEmbeddedConn() error {
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
		return fmt.Errorf("%w: --embedded with --server: --embedded runs a NATS server in this process and connects to it; to join a running server, leave out --embedded", cli.ErrUsage)
	default:
		return fmt.Errorf("%w: --embedded with %s: the embedded NATS server takes no credentials and no TLS; these flags go with --server", cli.ErrUsage, strings.Join(given, ", "))
	}
}
