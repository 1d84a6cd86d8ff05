package serve

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ProvisionHelp is provision's usage.
const ProvisionHelp = `provision [--server URL] [--replicas N] [--ack-wait D] [--max-deliver N] [--max-bytes N]
          [--tenants SCOPES] [--tenant-max-bytes N]

Creates or updates the streams APPROVALS, RECEIPTS and DEADLETTERS and the shared consumer
"executor", records what the server applied to each in the key-value bucket sendtwice-topology
(no TTL; only provisioning may write it), creates or updates the executors' intent ledger, the
key-value bucket sendtwice-intents (used with a task service that forgets a key when its task is
deleted, such as CalDAV; each entry with a TTL of its approval's lifetime) and the record of
redrives, the key-value bucket sendtwice-redrives (which dead letters executor redrive republished),
then exits. For deployments where only a provisioning user may manage JetStream and executors
run with --no-provision. Safe to run again: it creates what is missing and updates what
differs; it never deletes. Use the same --ack-wait and --max-deliver as the executors.

The record is what executors and verify hold the topology to: an executor refuses a consumer
that differs from it, and verify reports every difference and draws its window with the MaxAge
recorded. Run provision again after changing the topology on purpose, so that the record says
so; run it once after upgrading from a version that kept no record.

Each stream refuses messages larger than the gate accepts (84 KiB envelopes: the largest valid
one and room for white space, plus room for headers; streams provisioned before take larger ones
until provision runs again) and holds at most --max-bytes (default 1 GiB); a full stream
refuses new messages instead of dropping stored ones.

--tenants bounds what each tenant (a caller scope served under an account of its own, as in
deploy/auth) holds: its approvals are stored first in a stream of its own, INTAKE_<scope>, which
holds at most --tenant-max-bytes (each approval counting 1 KiB at least, so that the receipts of
many small ones stay bounded too) and refuses more, and which APPROVALS sources. One tenant that
sends as fast and as large as it can fills its own intake and leaves the others sending. The
tenants' bounds together may take at most half of --max-bytes. Name every tenant each time;
without --tenants, provision (and an executor that provisions) keeps the tenants as provisioned.`

// MaxBytesFlag declares --max-bytes, shared by provision and serve.
func MaxBytesFlag(fs *flag.FlagSet) *int64 {
	return fs.Int64("max-bytes", topology.DefaultMaxBytes,
		"`BYTES` each stream (APPROVALS, RECEIPTS, DEADLETTERS) may hold, per replica; a full stream refuses new\nmessages rather than dropping stored ones (-1: unlimited)")
}

// CheckMaxBytes validates --max-bytes: -1, or room for at least one
// message of the largest size a stream accepts.
func CheckMaxBytes(n int64) error {
	if n == -1 || n >= topology.DeadLetterMaxMsg {
		return nil
	}
	return fmt.Errorf("%w: --max-bytes %d: want -1 (unlimited) or at least %d", cli.ErrUsage, n, topology.DeadLetterMaxMsg)
}

// ProvisionConfig is provision's flags, as given: the connection and the
// topology to set up.
type ProvisionConfig struct {
	conn     *cli.ConnConfig
	topology topology.Config
	maxBytes *int64
	tenants  *string
}

// ProvisionFlagsVar defines provision's flags on fs.
func ProvisionFlagsVar(fs *flag.FlagSet) *ProvisionConfig {
	p := &ProvisionConfig{conn: cli.ConnFlags(fs)}
	fs.IntVar(&p.topology.Replicas, "replicas", 0, "stream and consumer replicas, 1 to 5: 3 on a cluster (default: as the existing streams have it, else 1)")
	fs.DurationVar(&p.topology.AckWait, "ack-wait", 30*time.Second, "consumer AckWait")
	fs.IntVar(&p.topology.MaxDeliver, "max-deliver", 5, "deliveries that may try a message before the executors dead-letter it (kept in the consumer's metadata; the consumer itself never drops a message)")
	p.maxBytes = MaxBytesFlag(fs)
	p.tenants = fs.String("tenants", "", "caller `SCOPES`, comma-separated, each served under an account of its own whose approvals go through\n"+
		"an intake stream of its own, INTAKE_<scope>, bounded by --tenant-max-bytes (default: keep those provisioned)")
	fs.Int64Var(&p.topology.TenantMaxBytes, "tenant-max-bytes", topology.DefaultTenantMaxBytes,
		"`BYTES` each tenant's intake stream may hold, per replica, each approval counting 1 KiB at least; a full one\n"+
			"refuses the tenant's new approvals until its older ones age out; the tenants' bounds together may take at\n"+
			"most half of --max-bytes")
	return p
}

// Provision creates or updates the streams, the consumer, their record
// and the intent ledger, and says so on stdout.
func Provision(ctx context.Context, p *ProvisionConfig, stdout, stderr io.Writer) error {
	want := p.topology
	want.MaxBytes = *p.maxBytes
	if err := CheckMaxBytes(want.MaxBytes); err != nil {
		return err
	}
	if *p.tenants != "" {
		want.Tenants = strings.Split(*p.tenants, ",")
	}
	if err := topology.CheckTenants(want); err != nil {
		return fmt.Errorf("%w: --tenants %q, --tenant-max-bytes %d: %w", cli.ErrUsage, *p.tenants, want.TenantMaxBytes, err)
	}
	if want.MaxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", cli.ErrUsage, want.MaxDeliver)
	}
	if want.AckWait <= 0 {
		return fmt.Errorf("%w: --ack-wait must be positive", cli.ErrUsage)
	}
	if want.Replicas < 0 || want.Replicas > 5 {
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", cli.ErrUsage, want.Replicas)
	}
	c, err := p.conn.Open("executor-provision", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	js := c.JS
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	log, _ := cli.NewLogger(stderr, "text", "warn")
	cfg, err := topology.SetUp(ctx, js, want, topology.SetUpOptions{ReplicasGiven: want.Replicas != 0, Logger: log})
	if err != nil {
		return err
	}
	// The intent ledger of executors whose task service forgets a key
	// when its task is deleted (CalDAV), replicated like the streams, so
	// that such executors can run with --no-provision.
	if err := ledger.Ensure(ctx, js, cfg.Replicas); err != nil {
		return err
	}
	// Which dead letters redrive republished, written by the operator.
	if err := redrive.Ensure(ctx, js, cfg.Replicas); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "streams %s, %s, %s and consumer %s ready (replicas %d), recorded in %s; intent ledger %s ready; redrive record %s ready\n",
		topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream, topology.Consumer, cfg.Replicas, topology.RecordBucket, ledger.Bucket, redrive.Bucket)
	for _, scope := range want.Tenants {
		fmt.Fprintf(stdout, "tenant %s: intake stream %s ready, holding at most %d bytes, sourced by %s\n",
			scope, topology.IntakeStream(scope), want.TenantMaxBytes, topology.ApprovalsStream)
	}
	return nil
}
