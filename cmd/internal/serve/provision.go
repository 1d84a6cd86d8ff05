package serve

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ProvisionHelp is provision's usage.
const ProvisionHelp = `provision [--server URL] [--replicas N] [--ack-wait D] [--max-deliver N] [--max-bytes N]

Creates or updates the streams APPROVALS, RECEIPTS and DEADLETTERS and the shared consumer
"executor", records what the server applied to each in the key-value bucket sendtwice-topology
(no TTL; only provisioning may write it), creates or updates the executors' intent ledger, the
key-value bucket sendtwice-intents (used with a task service that forgets a key when its task is
deleted, such as CalDAV; each entry with a TTL of its approval's lifetime), then exits. For deployments where only a provisioning user may manage JetStream and executors
run with --no-provision. Safe to run again: it creates what is missing and updates what
differs; it never deletes. Use the same --ack-wait and --max-deliver as the executors.

The record is what executors and verify hold the topology to: an executor refuses a consumer
that differs from it, and verify reports every difference and draws its window with the MaxAge
recorded. Run provision again after changing the topology on purpose, so that the record says
so; run it once after upgrading from a version that kept no record.

Each stream refuses messages larger than the gate accepts (256 KiB envelopes, plus room for
headers) and holds at most --max-bytes (default 1 GiB); a full stream refuses new messages
instead of dropping stored ones.`

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

// ProvisionConfig is provision's flags, as given.
type ProvisionConfig struct {
	conn       *cli.ConnConfig
	replicas   *int
	ackWait    *time.Duration
	maxDeliver *int
	maxBytes   *int64
}

// ProvisionFlagsVar defines provision's flags on fs.
func ProvisionFlagsVar(fs *flag.FlagSet) *ProvisionConfig {
	conn := cli.ConnFlags(fs)
	replicas := fs.Int("replicas", 0, "stream and consumer replicas, 1 to 5: 3 on a cluster (default: as the existing streams have it, else 1)")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "consumer AckWait")
	maxDeliver := fs.Int("max-deliver", 5, "deliveries that may try a message before the executors dead-letter it (kept in the consumer's metadata; the consumer itself never drops a message)")
	maxBytes := MaxBytesFlag(fs)
	return &ProvisionConfig{conn: conn, replicas: replicas, ackWait: ackWait, maxDeliver: maxDeliver, maxBytes: maxBytes}
}

// Provision creates or updates the streams, the consumer, their record
// and the intent ledger, and says so on stdout.
func Provision(ctx context.Context, p *ProvisionConfig, stdout, stderr io.Writer) error {
	conn, replicas, ackWait, maxDeliver, maxBytes := p.conn, p.replicas, p.ackWait, p.maxDeliver, p.maxBytes
	if err := CheckMaxBytes(*maxBytes); err != nil {
		return err
	}
	if *maxDeliver < 2 {
		return fmt.Errorf("%w: --max-deliver %d: want at least 2 so that a redelivery can happen", cli.ErrUsage, *maxDeliver)
	}
	if *ackWait <= 0 {
		return fmt.Errorf("%w: --ack-wait must be positive", cli.ErrUsage)
	}
	if *replicas < 0 || *replicas > 5 {
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", cli.ErrUsage, *replicas)
	}
	c, err := conn.Open("executor-provision", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	js := c.JS
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	log, _ := cli.NewLogger(stderr, "text", "warn")
	cfg, err := topology.SetUp(ctx, js, topology.Config{Replicas: *replicas, AckWait: *ackWait, MaxDeliver: *maxDeliver, MaxBytes: *maxBytes},
		topology.SetUpOptions{ReplicasGiven: *replicas != 0, Logger: log})
	if err != nil {
		return err
	}
	// The intent ledger of executors whose task service forgets a key
	// when its task is deleted (CalDAV), replicated like the streams, so
	// that such executors can run with --no-provision.
	if err := ledger.Ensure(ctx, js, cfg.Replicas); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "streams %s, %s, %s and consumer %s ready (replicas %d), recorded in %s; intent ledger %s ready\n",
		topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream, topology.Consumer, cfg.Replicas, topology.RecordBucket, ledger.Bucket)
	return nil
}
