package topology

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
)

// Names of the streams, subjects and the consumer.
const (
	ApprovalsStream   = "APPROVALS"
	ApprovalsSubjects = "approvals.>"
	ReceiptsStream    = "RECEIPTS"
	ReceiptsSubjects  = "receipts.>"
	DeadLetterStream  = "DEADLETTERS"
	DeadLetterSubject = "deadletters.>"
	Consumer          = "executor"
)

// Headers on dead letters and receipts.
const (
	HeaderReason    = "Sendtwice-Reason"
	HeaderStreamSeq = "Sendtwice-Stream-Seq"
	HeaderDelivered = "Sendtwice-Delivered"
	HeaderOutcome   = "Sendtwice-Outcome"
	HeaderExecutor  = "Sendtwice-Executor"
)

// Config sizes the topology. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Replicas int
	// MaxAge bounds how long approvals, receipts and dead letters are kept.
	MaxAge time.Duration
	// DuplicateWindow is how long a Nats-Msg-Id is remembered: long enough
	// for one publish call's own retries, no longer.
	DuplicateWindow time.Duration
	// AckWait is how long a delivery may go without an ack or a progress
	// signal before it is delivered again: the retry delay after an
	// executor died with the delivery in hand.
	AckWait time.Duration
	// MaxDeliver is the budget: how many deliveries may try a message
	// before it is dead-lettered. The executors count it, not the server:
	// the consumer itself never gives up on a message (its MaxDeliver is
	// unlimited), and the delivery after the budget, or a transient failure
	// on its last delivery, is dead-lettered by an executor.
	MaxDeliver int
	// NakDelay is the first delay after a transient failure; it doubles on
	// each further delivery, up to MaxNakDelay.
	NakDelay      time.Duration
	MaxNakDelay   time.Duration
	MaxAckPending int
	// MaxBytes bounds each of the three streams on disk (per replica). A
	// full stream refuses new messages (DiscardNew) rather than dropping
	// stored ones: a publisher sees its send fail, an executor retries its
	// receipt or dead letter later. Negative means unlimited.
	MaxBytes int64
	// Tenants are the caller scopes whose approvals go through an intake
	// stream of their own (IntakeConfig); none keeps those provisioned.
	Tenants []string
	// TenantMaxBytes bounds each tenant's intake stream.
	TenantMaxBytes int64
}

// Message size limits. An approval is one envelope, which the gate refuses
// over document.MaxEnvelopeBytes (derived from the documents' own bounds);
// the stream refuses anything larger than the gate accepts plus room for
// headers, so that one tenant's messages cannot be larger than a valid one.
// Receipts quote the ids and the path of a refused envelope and dead
// letters copy it whole with their own headers, so both take the envelope
// limit and a larger header allowance.
const (
	MaxEnvelopeBytes  = document.MaxEnvelopeBytes
	HeaderAllowance   = 16 << 10
	ApprovalMaxMsg    = MaxEnvelopeBytes + HeaderAllowance
	ReceiptMaxMsg     = MaxEnvelopeBytes + 4*HeaderAllowance
	DeadLetterMaxMsg  = MaxEnvelopeBytes + 4*HeaderAllowance
	DefaultMaxBytes   = 1 << 30
	unlimitedMaxBytes = -1
)

// DefaultConfig is what an embedded, single-node deployment uses.
func DefaultConfig() Config {
	return Config{
		Replicas:        1,
		MaxAge:          7 * 24 * time.Hour,
		DuplicateWindow: 2 * time.Minute,
		AckWait:         30 * time.Second,
		MaxDeliver:      5,
		NakDelay:        time.Second,
		MaxNakDelay:     30 * time.Second,
		MaxAckPending:   4096,
		MaxBytes:        DefaultMaxBytes,
		TenantMaxBytes:  DefaultTenantMaxBytes,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	orDefault(&c.Replicas, d.Replicas)
	orDefault(&c.MaxAge, d.MaxAge)
	orDefault(&c.DuplicateWindow, d.DuplicateWindow)
	orDefault(&c.AckWait, d.AckWait)
	orDefault(&c.MaxDeliver, d.MaxDeliver)
	orDefault(&c.NakDelay, d.NakDelay)
	orDefault(&c.MaxNakDelay, d.MaxNakDelay)
	orDefault(&c.MaxAckPending, d.MaxAckPending)
	orDefault(&c.MaxBytes, d.MaxBytes)
	orDefault(&c.TenantMaxBytes, d.TenantMaxBytes)
	if c.MaxBytes < 0 {
		c.MaxBytes = unlimitedMaxBytes
	}
	return c
}

// orDefault sets *v to d when *v is the zero value: a field left out takes
// the default.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// Keys of the consumer's metadata that carry the retry settings, so that
// executors started with --no-provision follow the consumer as provisioned.
const (
	MetaMaxDeliver  = "sendtwice.max_deliver"
	MetaNakDelay    = "sendtwice.nak_delay"
	MetaMaxNakDelay = "sendtwice.max_nak_delay"
)

// FromConsumer returns c with the retry settings of the consumer cc: its
// AckWait, and the budget and nak delays from its metadata. A consumer
// provisioned before the executors counted the budget has no such metadata
// and a finite MaxDeliver at which the server drops a message silently;
// there the budget is one below that MaxDeliver, whatever c says, so that
// every instance counts the same budget and the server's last delivery
// still reaches an executor, which dead-letters it.
func FromConsumer(c Config, cc jetstream.ConsumerConfig) Config {
	c = c.withDefaults()
	if cc.AckWait > 0 {
		c.AckWait = cc.AckWait
	}
	budget, provisioned := metaBudget(cc)
	switch {
	case provisioned:
		c.MaxDeliver = budget
	case cc.MaxDeliver > 0:
		c.MaxDeliver = max(cc.MaxDeliver-1, 1)
	}
	if v, err := time.ParseDuration(cc.Metadata[MetaNakDelay]); err == nil && v > 0 {
		c.NakDelay = v
	}
	if v, err := time.ParseDuration(cc.Metadata[MetaMaxNakDelay]); err == nil && v > 0 {
		c.MaxNakDelay = v
	}
	if cc.MaxDeliver > 0 && c.MaxDeliver >= cc.MaxDeliver {
		c.MaxDeliver = max(cc.MaxDeliver-1, 1)
	}
	return c
}

// metaBudget reads the budget from the consumer's metadata.
func metaBudget(cc jetstream.ConsumerConfig) (int, bool) {
	v, err := strconv.Atoi(cc.Metadata[MetaMaxDeliver])
	return v, err == nil && v > 0
}

// CallBound is the highest delivery number of a message that may have
// called the task service under the consumer cc: the budget in its
// metadata; for a consumer provisioned before the budget was kept there,
// its MaxDeliver (the executors of that time called on every delivery the
// server made); 0 when nothing bounds it.
func CallBound(cc jetstream.ConsumerConfig) int {
	if budget, ok := metaBudget(cc); ok {
		if cc.MaxDeliver > 0 {
			return min(budget, cc.MaxDeliver)
		}
		return budget
	}
	return max(cc.MaxDeliver, 0)
}

// streamConfig is what the three streams share: file storage, limits
// retention, c's age, de-duplication window, replicas and size, and
// DiscardNew: a full stream refuses new messages rather than dropping stored
// ones.
func streamConfig(c Config, name, description, subject string, maxMsg int32) jetstream.StreamConfig {
	c = c.withDefaults()
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    []string{subject},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      c.MaxAge,
		Duplicates:  c.DuplicateWindow,
		Replicas:    c.Replicas,
		MaxMsgSize:  maxMsg,
		MaxBytes:    c.MaxBytes,
		Discard:     jetstream.DiscardNew,
	}
}

// ApprovalsConfig is the APPROVALS stream. A full stream refuses new
// approvals: dropping the oldest would silently lose approvals no executor
// has handled yet.
func ApprovalsConfig(c Config) jetstream.StreamConfig {
	sc := streamConfig(c, ApprovalsStream, "approved task requests, one envelope a message", ApprovalsSubjects, ApprovalMaxMsg)
	// Publishers with many approvals at hand store them as atomic
	// batches: one sync for the batch instead of one per message.
	sc.AllowAtomicPublish = true
	// A tenant whose approval an intake stored reads the APPROVALS
	// sequence of its sourced copy with a direct get whose API subject
	// names the approval's subject, confined to its own scope.
	sc.AllowDirect = true
	return sc
}

// ReceiptsConfig is the RECEIPTS stream. Executors store receipts in atomic
// batches: the stream stores a batch whole or not at all, with one sync, and
// acknowledges its commit only once all of it is synced. A full stream
// refuses new receipts; the executor naks and retries, so a message is never
// acked without its receipt.
func ReceiptsConfig(c Config) jetstream.StreamConfig {
	sc := streamConfig(c, ReceiptsStream, "task-receipt.v1 documents, receipts.<scope>.<intent>", ReceiptsSubjects, ReceiptMaxMsg)
	sc.AllowAtomicPublish = true
	// A publisher reads the stored receipts of its intent by a direct
	// get whose subject names the receipts subject
	// ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>), so that
	// a permission confines it to its own scope's receipts. The older
	// $JS.API.STREAM.MSG.GET.RECEIPTS carries the subject in its body,
	// where no permission can see it.
	sc.AllowDirect = true
	return sc
}

// DeadLetterConfig is the dead-letter stream: the original payload, with
// the reason and the delivery in headers. A full stream refuses new dead
// letters; the message stays in APPROVALS and is tried again, rather than
// dropping older ones.
func DeadLetterConfig(c Config) jetstream.StreamConfig {
	return streamConfig(c, DeadLetterStream, "approvals that kept failing: original payload, reason in headers", DeadLetterSubject, DeadLetterMaxMsg)
}

// ConsumerConfig is the one durable pull consumer all executors share.
func ConsumerConfig(c Config) jetstream.ConsumerConfig {
	c = c.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       Consumer,
		Description:   "executor instances: gate, call the task service, publish receipts",
		FilterSubject: ApprovalsSubjects,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		// The executors count the budget and dead-letter a message
		// themselves; a server limit would drop it silently instead.
		MaxDeliver: -1,
		// No BackOff: it would override the executors' nak delays. A
		// delivery whose executor died comes back after AckWait.
		MaxAckPending: c.MaxAckPending,
		Replicas:      c.Replicas,
		Metadata: map[string]string{
			MetaMaxDeliver:  strconv.Itoa(c.MaxDeliver),
			MetaNakDelay:    c.NakDelay.String(),
			MetaMaxNakDelay: c.MaxNakDelay.String(),
		},
	}
}

// Ensure creates or updates the three streams, the intake streams of
// c.Tenants (tenants.go) and the consumer, records
// what the server applied (ReadRecord reads it back), and returns the
// consumer.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	c = c.withDefaults()
	p := Provisioned{Streams: map[string]jetstream.StreamConfig{}, Recorded: true}
	approvals := ApprovalsConfig(c)
	if err := ensureIntakes(ctx, js, c, &approvals); err != nil {
		return nil, err
	}
	for _, sc := range []jetstream.StreamConfig{approvals, ReceiptsConfig(c), DeadLetterConfig(c)} {
		s, err := js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("topology: creating stream %s: %w", sc.Name, err)
		}
		p.Streams[sc.Name] = s.CachedInfo().Config
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, ApprovalsStream, ConsumerConfig(c))
	if err != nil {
		return nil, fmt.Errorf("topology: creating consumer %s: %w", Consumer, err)
	}
	p.Consumer = cons.CachedInfo().Config
	p.At = time.Now()
	if err := record(ctx, js, c.Replicas, p); err != nil {
		return nil, err
	}
	return cons, nil
}

// NakDelayAfter is the delay before the next attempt after a transient
// failure on the given delivery (1 for the first).
func NakDelayAfter(c Config, delivered uint64) time.Duration {
	c = c.withDefaults()
	d := c.NakDelay
	for i := uint64(1); i < delivered && d < c.MaxNakDelay; i++ {
		d *= 2
	}
	return min(d, c.MaxNakDelay)
}

// RedeliveryAfter is when the server really delivers again a message
// nak'ed with delay on the given delivery by the consumer cc. With no
// BackOff on the consumer, as provisioned here, that is the delay itself. A
// consumer with a BackOff (provisioned by an older version) takes
// BackOff[delivered-1] instead of AckWait as the deadline the nak delay
// counts against, so the redelivery comes that much later.
func RedeliveryAfter(cc jetstream.ConsumerConfig, delay time.Duration, delivered uint64) time.Duration {
	if len(cc.BackOff) == 0 || delivered == 0 {
		return delay
	}
	i := min(delivered-1, uint64(len(cc.BackOff)-1))
	return max(delay-cc.AckWait+cc.BackOff[i], 0)
}

// Budget is how long a message can take, at most, before it is
// dead-lettered.
type Budget struct {
	// Deliveries is the number of deliveries that try the task service.
	Deliveries int
	// Delays are the waits after a transient failure on each delivery but
	// the last, whose failure is dead-lettered at once.
	Delays []time.Duration
	// Transient is the sum of Delays: from the first delivery to the dead
	// letter when every call fails at once (no service answering), plus,
	// when calls hang, up to Deliveries call timeouts.
	Transient time.Duration
	// Crash is Deliveries times AckWait: from the first delivery to the
	// dead letter when every executor that takes the message dies at once,
	// plus whatever time each worked before it died.
	Crash time.Duration
}

// DeadLetterBudget returns the retry schedule and the time before a dead
// letter for c.
func DeadLetterBudget(c Config) Budget {
	c = c.withDefaults()
	b := Budget{Deliveries: c.MaxDeliver, Crash: time.Duration(c.MaxDeliver) * c.AckWait}
	for k := 1; k < c.MaxDeliver; k++ {
		d := NakDelayAfter(c, uint64(k))
		b.Delays = append(b.Delays, d)
		b.Transient += d
	}
	return b
}
