package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Metric names.
const (
	RequestsReceived = "sendtwice_requests_received"
	CreatesExecuted  = "sendtwice_creates_executed"
	TasksExisting    = "sendtwice_tasks_existing"
	Receipts         = "sendtwice_receipts_total"
	GateRejections   = "sendtwice_gate_rejections_total"
	Redeliveries     = "sendtwice_redeliveries_total"
	Retries          = "sendtwice_retries_total"
	Processing       = "sendtwice_processing_seconds"
	ConsumerLag      = "sendtwice_consumer_lag"

	// Per scope (label "scope"), and the keys' figures.
	ScopeRequestsReceived = "sendtwice_scope_requests_received"
	ScopeCreatesExecuted  = "sendtwice_scope_creates_executed"
	ScopeTasksExisting    = "sendtwice_scope_tasks_existing"
	ScopeKeysLive         = "sendtwice_scope_keys_live"
	KeysLive              = "sendtwice_keys_live"
	KeysCompacted         = "sendtwice_keys_compacted"
	TasksDeleted          = "sendtwice_tasks_deleted"
)

// OtherScopes is the scope label under which the scopes past the label
// bound are summed. It is never a scope's name (a scope starts with a
// letter or digit).
const OtherScopes = "_other"

// DefaultMaxScopeLabels is the default bound on scope labels.
const DefaultMaxScopeLabels = 20

// Outcomes are the receipt outcomes, each exported from the start so that a
// dashboard shows 0 rather than no data.
var Outcomes = []string{
	document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict,
	document.OutcomeRejected, document.OutcomeDeadLettered, document.OutcomeInDoubt,
}

// GateChecks are the gate's check names, in its order, each exported from
// the start like Outcomes. They are the stable names receipts carry in
// rejection.check; a test holds them equal to the gate's list, which this
// package does not import.
var GateChecks = []string{
	"envelope", "approval_format", "signature", "expiry",
	"candidate_binding", "request_binding", "capability", "destination", "scope",
}

// ProcessingBuckets are the bounds of the processing histogram, in seconds:
// from a millisecond (a replay on one machine) to half a minute (a call
// retried through a cluster fail-over).
var ProcessingBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewRegistry returns a registry holding the Go runtime and process
// collectors; the callers add theirs.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Executor holds one executor instance's metrics. Its methods fit the
// executor's OnReceipt and OnRetry hooks.
type Executor struct {
	receipts     *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	redeliveries prometheus.Counter
	retries      prometheus.Counter
	processing   prometheus.Histogram
}

// NewExecutor registers an executor's metrics with reg.
func NewExecutor(reg prometheus.Registerer) (*Executor, error) {
	m := &Executor{
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: Receipts,
			Help: "Receipts this executor stored, by outcome.",
		}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: GateRejections,
			Help: "Messages this executor refused at the gate, by the check that failed; the task service never heard of them.",
		}, []string{"check"}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: Redeliveries,
			Help: "Handlings of a message that had been delivered before (an executor died, an ack or a reply was lost, or a retry).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: Retries,
			Help: "Deliveries given back for a later attempt after a transient failure.",
		}),
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    Processing,
			Help:    "Seconds from a delivery's arrival to its receipt being stored and the message acked or terminated.",
			Buckets: ProcessingBuckets,
		}),
	}
	for _, o := range Outcomes {
		m.receipts.WithLabelValues(o)
	}
	for _, c := range GateChecks {
		m.rejections.WithLabelValues(c)
	}
	for _, c := range []prometheus.Collector{m.receipts, m.rejections, m.redeliveries, m.retries, m.processing} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: registering the executor's metrics: %w", err)
		}
	}
	return m, nil
}

// ObserveReceipt counts one stored receipt; it is the executor's OnReceipt.
func (m *Executor) ObserveReceipt(r *document.Receipt, took time.Duration) {
	m.receipts.WithLabelValues(r.Outcome).Inc()
	if r.Rejection != nil {
		m.rejections.WithLabelValues(r.Rejection.Check).Inc()
	}
	if r.Delivery.Delivered > 1 {
		m.redeliveries.Inc()
	}
	m.processing.Observe(took.Seconds())
}

// ObserveRetry counts a delivery given back for later; it is the executor's
// OnRetry.
func (m *Executor) ObserveRetry(delivered uint64, _ error) {
	m.retries.Inc()
	if delivered > 1 {
		m.redeliveries.Inc()
	}
}

// serviceCollector exports the task service's three counters, read at each
// scrape.
type serviceCollector struct {
	stats               func() (provider.Counts, bool)
	req, creates, tasks *prometheus.Desc
}

// RegisterService registers the task service's counters with reg as the
// gauges sendtwice_requests_received, sendtwice_creates_executed and
// sendtwice_tasks_existing. stats is called at each scrape; when it reports
// false (no store open), the gauges are left out of that scrape.
func RegisterService(reg prometheus.Registerer, stats func() (provider.Counts, bool)) error {
	c := &serviceCollector{
		stats:   stats,
		req:     prometheus.NewDesc(RequestsReceived, "Requests the task service received: every well-formed create call, replays and conflicts included. Exact; survives restarts; never decreases.", nil, nil),
		creates: prometheus.NewDesc(CreatesExecuted, "Tasks the task service created. Exact; survives restarts; never decreases.", nil, nil),
		tasks:   prometheus.NewDesc(TasksExisting, "Tasks that exist in the task service.", nil, nil),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("metrics: registering the service's counters: %w", err)
	}
	return nil
}

func (c *serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.req
	ch <- c.creates
	ch <- c.tasks
}

func (c *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	n, ok := c.stats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.req, prometheus.GaugeValue, float64(n.RequestsReceived))
	ch <- prometheus.MustNewConstMetric(c.creates, prometheus.GaugeValue, float64(n.CreatesExecuted))
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n.TasksExisting))
}

// scopeCollector exports the task service's counters per scope, with at
// most maxLabels scope labels.
type scopeCollector struct {
	stats                     func() (provider.KeyCounts, []provider.ScopeCounts, bool)
	maxLabels                 int
	req, creates, tasks, keys *prometheus.Desc
	live, compacted, deleted  *prometheus.Desc
}

// RegisterServiceScopes registers the task service's counters per scope:
// the gauges sendtwice_scope_requests_received, _creates_executed,
// _tasks_existing and _keys_live, labelled scope, and the totals
// sendtwice_keys_live, sendtwice_keys_compacted and sendtwice_tasks_deleted
// (so that creates executed minus tasks deleted equals tasks existing). To keep the label
// cardinality bounded, the first maxLabels scopes in scope order (stats
// gives them sorted) get a label of their own and every other scope is
// summed under scope="_other" (OtherScopes); maxLabels <= 0 means
// DefaultMaxScopeLabels. stats is called at each scrape; false leaves the
// gauges out.
func RegisterServiceScopes(reg prometheus.Registerer, maxLabels int, stats func() (provider.KeyCounts, []provider.ScopeCounts, bool)) error {
	if maxLabels <= 0 {
		maxLabels = DefaultMaxScopeLabels
	}
	scope := []string{"scope"}
	c := &scopeCollector{
		stats:     stats,
		maxLabels: maxLabels,
		req:       prometheus.NewDesc(ScopeRequestsReceived, "Requests the task service received in one scope (the scopes past the label bound summed under scope=\"_other\").", scope, nil),
		creates:   prometheus.NewDesc(ScopeCreatesExecuted, "Tasks the task service created in one scope (past the label bound: scope=\"_other\").", scope, nil),
		tasks:     prometheus.NewDesc(ScopeTasksExisting, "Tasks that exist in one scope (past the label bound: scope=\"_other\").", scope, nil),
		keys:      prometheus.NewDesc(ScopeKeysLive, "Keys (scope, intent id) the task service keeps in one scope (past the label bound: scope=\"_other\").", scope, nil),
		live:      prometheus.NewDesc(KeysLive, "Keys (scope, intent id) the task service keeps: an approval seen for them may still pass the gate, or they never expire.", nil, nil),
		compacted: prometheus.NewDesc(KeysCompacted, "Keys the task service forgot after every approval seen for them expired (plus clock allowance and margin). Never decreases.", nil, nil),
		deleted:   prometheus.NewDesc(TasksDeleted, "Tasks their owners deleted; their keys stay. Creates executed minus this is tasks existing. Never decreases.", nil, nil),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("metrics: registering the service's counters per scope: %w", err)
	}
	return nil
}

func (c *scopeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.req, c.creates, c.tasks, c.keys, c.live, c.compacted, c.deleted} {
		ch <- d
	}
}

func (c *scopeCollector) Collect(ch chan<- prometheus.Metric) {
	keys, scopes, ok := c.stats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(keys.Live))
	ch <- prometheus.MustNewConstMetric(c.compacted, prometheus.GaugeValue, float64(keys.Compacted))
	ch <- prometheus.MustNewConstMetric(c.deleted, prometheus.GaugeValue, float64(keys.TasksDeleted))
	emit := func(sc provider.ScopeCounts, label string) {
		ch <- prometheus.MustNewConstMetric(c.req, prometheus.GaugeValue, float64(sc.RequestsReceived), label)
		ch <- prometheus.MustNewConstMetric(c.creates, prometheus.GaugeValue, float64(sc.CreatesExecuted), label)
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(sc.TasksExisting), label)
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(sc.KeysLive), label)
	}
	var other provider.ScopeCounts
	for i, sc := range scopes {
		if i < c.maxLabels {
			emit(sc, sc.Scope)
			continue
		}
		other.RequestsReceived += sc.RequestsReceived
		other.CreatesExecuted += sc.CreatesExecuted
		other.TasksExisting += sc.TasksExisting
		other.KeysLive += sc.KeysLive
	}
	if len(scopes) > c.maxLabels {
		emit(other, OtherScopes)
	}
}

// ErrNotRead is the consumer state's error before its first read.
var ErrNotRead = errors.New("metrics: the consumer has not been read yet")

// Consumer follows the shared consumer's lag (pending plus ack-pending
// messages) and exports it as sendtwice_consumer_lag. Every executor
// instance reports the same consumer, so a dashboard takes the max over
// instances. The gauge is left out until the first successful read.
type Consumer struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	known bool
	lag   uint64
	err   error
}

// NewConsumer registers the consumer lag gauge with reg.
func NewConsumer(reg prometheus.Registerer) (*Consumer, error) {
	c := &Consumer{
		desc: prometheus.NewDesc(ConsumerLag,
			"Messages of the shared consumer not yet finished: pending (not yet delivered) plus ack pending (delivered, not yet acked).", nil, nil),
		err: ErrNotRead,
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("metrics: registering the consumer lag: %w", err)
	}
	return c, nil
}

func (c *Consumer) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *Consumer) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	known, lag := c.known, c.lag
	c.mu.Unlock()
	if known {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(lag))
	}
}

// Read reads the consumer's state once.
func (c *Consumer) Read(ctx context.Context, js jetstream.JetStream) error {
	info, err := readConsumer(ctx, js)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	if err == nil {
		c.known, c.lag = true, info.NumPending+uint64(max(info.NumAckPending, 0))
	}
	return err
}

func readConsumer(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	cons, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return nil, fmt.Errorf("reading consumer %s on %s: %w", topology.Consumer, topology.ApprovalsStream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading consumer %s on %s: %w", topology.Consumer, topology.ApprovalsStream, err)
	}
	return info, nil
}

// Watch reads the consumer's state every interval until ctx is done, each
// read bounded by the interval (at most 5 s).
func (c *Consumer) Watch(ctx context.Context, js jetstream.JetStream, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, min(interval, 5*time.Second))
		_ = c.Read(rctx, js)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Err returns the last read's error: nil after a successful read,
// ErrNotRead before the first.
func (c *Consumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Lag returns the last lag read and whether one was read.
func (c *Consumer) Lag() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lag, c.known
}
