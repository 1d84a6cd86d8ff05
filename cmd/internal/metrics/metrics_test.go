package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// gathered returns every sample of reg as "name{k="v",...}" -> value, and
// the metric types by name.
func gathered(t *testing.T, reg prometheus.Gatherer) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	types := map[string]dto.MetricType{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[key+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out, types
}

func ptr(s string) *string { return &s }

func TestExecutorMetricsCountReceiptsRejectionsRedeliveriesAndLatency(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewExecutor(reg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := gathered(t, reg)
	for _, o := range metrics.Outcomes {
		if v, ok := got[metrics.Receipts+`{outcome="`+o+`"}`]; !ok || v != 0 {
			t.Errorf("outcome %s not exported as 0 before any receipt: %v, %v", o, v, ok)
		}
	}
	if v, ok := got[metrics.GateRejections+`{check="capability"}`]; !ok || v != 0 {
		t.Errorf("gate check capability not exported as 0: %v, %v", v, ok)
	}

	m.ObserveReceipt(&document.Receipt{Outcome: document.OutcomeCreated, TaskID: ptr("fake-task-0001"),
		Delivery: document.Delivery{Delivered: 1}}, 3*time.Millisecond)
	m.ObserveReceipt(&document.Receipt{Outcome: document.OutcomeReplayed, TaskID: ptr("fake-task-0001"),
		Delivery: document.Delivery{Delivered: 2}}, 40*time.Millisecond)
	m.ObserveReceipt(&document.Receipt{Outcome: document.OutcomeRejected,
		Rejection: &document.Rejection{Check: "request_binding", Path: "$.request", Reason: "digest differs"},
		Delivery:  document.Delivery{Delivered: 1}}, time.Millisecond)
	m.ObserveRetry(1, errors.New("timeout"))
	m.ObserveRetry(2, errors.New("timeout"))

	got, types := gathered(t, reg)
	want := map[string]float64{
		metrics.Receipts + `{outcome="created"}`:               1,
		metrics.Receipts + `{outcome="replayed"}`:              1,
		metrics.Receipts + `{outcome="rejected"}`:              1,
		metrics.Receipts + `{outcome="dead_lettered"}`:         0,
		metrics.GateRejections + `{check="request_binding"}`:   1,
		metrics.GateRejections + `{check="candidate_binding"}`: 0,
		metrics.Redeliveries:                                   2, // the replay on delivery 2, the retry of delivery 2
		metrics.Retries:                                        2,
		metrics.Processing + "_count":                          3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if s := got[metrics.Processing+"_sum"]; s < 0.043 || s > 0.045 {
		t.Errorf("processing sum %v s, want 0.044", s)
	}
	if types[metrics.Processing] != dto.MetricType_HISTOGRAM || types[metrics.Receipts] != dto.MetricType_COUNTER {
		t.Errorf("types %v", types)
	}
}

func TestServiceGaugesAreReadAtEachScrapeAndLeftOutWithoutAStore(t *testing.T) {
	reg := prometheus.NewRegistry()
	counts, open := provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1}, true
	if err := metrics.RegisterService(reg, func() (provider.Counts, bool) { return counts, open }); err != nil {
		t.Fatal(err)
	}
	got, types := gathered(t, reg)
	if got[metrics.RequestsReceived] != 2 || got[metrics.CreatesExecuted] != 1 || got[metrics.TasksExisting] != 1 {
		t.Errorf("gauges %v, want 2, 1, 1", got)
	}
	for _, n := range []string{metrics.RequestsReceived, metrics.CreatesExecuted, metrics.TasksExisting} {
		if types[n] != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v, want a gauge", n, types[n])
		}
	}
	counts.RequestsReceived = 3
	if got, _ := gathered(t, reg); got[metrics.RequestsReceived] != 3 {
		t.Errorf("requests %v after the store counted 3", got[metrics.RequestsReceived])
	}
	open = false
	if got, _ := gathered(t, reg); len(got) != 0 {
		t.Errorf("without a store the scrape holds %v, want nothing", got)
	}
	if err := metrics.RegisterService(reg, func() (provider.Counts, bool) { return counts, true }); err == nil {
		t.Error("registering the service's gauges twice succeeded")
	}
}

func TestScopeGaugesHaveAtMostNLabelsAndSumTheRestUnderOther(t *testing.T) {
	reg := prometheus.NewRegistry()
	scopes := []provider.ScopeCounts{
		{Scope: "a", Counts: provider.Counts{RequestsReceived: 1, CreatesExecuted: 1, TasksExisting: 1}, KeysLive: 1},
		{Scope: "b", Counts: provider.Counts{RequestsReceived: 2, CreatesExecuted: 1, TasksExisting: 1}, KeysLive: 1},
		{Scope: "c", Counts: provider.Counts{RequestsReceived: 3, CreatesExecuted: 2, TasksExisting: 1}, KeysLive: 2},
		{Scope: "d", Counts: provider.Counts{RequestsReceived: 4, CreatesExecuted: 1, TasksExisting: 0}, KeysLive: 1},
	}
	keys := provider.KeyCounts{Live: 5, Compacted: 7, TasksDeleted: 4}
	if err := metrics.RegisterServiceScopes(reg, 2, func() (provider.KeyCounts, []provider.ScopeCounts, bool) { return keys, scopes, true }); err != nil {
		t.Fatal(err)
	}
	got, _ := gathered(t, reg)
	want := map[string]float64{
		metrics.ScopeRequestsReceived + `{scope="a"}`: 1, metrics.ScopeRequestsReceived + `{scope="b"}`: 2,
		metrics.ScopeRequestsReceived + `{scope="_other"}`: 7, metrics.ScopeCreatesExecuted + `{scope="_other"}`: 3,
		metrics.ScopeTasksExisting + `{scope="_other"}`: 1, metrics.ScopeKeysLive + `{scope="_other"}`: 3,
		metrics.KeysLive: 5, metrics.KeysCompacted: 7, metrics.TasksDeleted: 4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	labels := map[string]bool{}
	for k := range got {
		if i := strings.Index(k, "{"); i >= 0 && strings.HasPrefix(k, metrics.ScopeRequestsReceived+"{") {
			labels[k[i:]] = true
		}
	}
	if len(labels) != 3 {
		t.Errorf("scope labels %v; want 2 scopes and _other", labels)
	}
}

func TestConsumerLagIsPendingPlusAckPending(t *testing.T) {
	js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	reg := prometheus.NewRegistry()
	c, err := metrics.NewConsumer(reg)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.Err(), metrics.ErrNotRead) {
		t.Errorf("before a read: %v", c.Err())
	}
	if got, _ := gathered(t, reg); len(got) != 0 {
		t.Errorf("lag exported before it was read: %v", got)
	}
	if err := c.Read(ctx, js); err == nil {
		t.Error("reading a consumer that does not exist succeeded")
	}

	cons, err := topology.Ensure(ctx, js, topology.Config{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := js.Publish(ctx, "approvals.lag", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	// Take two and leave them unacked: 3 pending + 2 ack pending.
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d, want 2", n)
	}
	if err := c.Read(ctx, js); err != nil {
		t.Fatal(err)
	}
	if lag, ok := c.Lag(); !ok || lag != 5 {
		t.Errorf("lag %d (%v), want 5", lag, ok)
	}
	if got, _ := gathered(t, reg); got[metrics.ConsumerLag] != 5 {
		t.Errorf("exported lag %v, want 5", got[metrics.ConsumerLag])
	}

	// Watch keeps it current and stops with its context.
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Watch(wctx, js, 20*time.Millisecond); close(done) }()
	if err := js.DeleteStream(ctx, topology.ApprovalsStream); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.Err() == nil {
		t.Error("the watch did not notice that the consumer is gone")
	}
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}
