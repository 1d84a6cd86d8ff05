package topology_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestTheDefaultBudgetIsFiveDeliveriesFifteenSecondsOfNakDelaysOrFiveAckWaits(t *testing.T) {
	b := topology.DeadLetterBudget(topology.Config{})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if b.Deliveries != 5 || !slices.Equal(b.Delays, want) || b.Transient != 15*time.Second || b.Crash != 150*time.Second {
		t.Fatalf("budget %+v, want 5 deliveries, delays %v (15s), crashes 150s", b, want)
	}
}

func TestTheNakDelayDoublesUpToItsCeiling(t *testing.T) {
	c := topology.Config{NakDelay: time.Second, MaxNakDelay: 5 * time.Second, MaxDeliver: 6}
	var got []time.Duration
	for d := uint64(1); d <= 5; d++ {
		got = append(got, topology.NakDelayAfter(c, d))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	if b := topology.DeadLetterBudget(c); b.Transient != 17*time.Second {
		t.Fatalf("budget %+v, want 17s of delays", b)
	}
}

func TestTheConsumerNeverDropsAMessageNorOverridesTheNakDelays(t *testing.T) {
	cc := topology.ConsumerConfig(topology.Config{MaxDeliver: 7, NakDelay: 300 * time.Millisecond})
	if cc.MaxDeliver != -1 || len(cc.BackOff) != 0 {
		t.Fatalf("consumer MaxDeliver %d, BackOff %v: want unlimited and none", cc.MaxDeliver, cc.BackOff)
	}
	c := topology.FromConsumer(topology.Config{}, cc)
	if c.MaxDeliver != 7 || c.NakDelay != 300*time.Millisecond || c.MaxNakDelay != 30*time.Second {
		t.Fatalf("read back %+v, want the budget and delays provisioned", c)
	}
	for d := uint64(1); d <= 7; d++ {
		if got, want := topology.RedeliveryAfter(cc, topology.NakDelayAfter(c, d), d), topology.NakDelayAfter(c, d); got != want {
			t.Fatalf("after delivery %d the server redelivers in %s, not the nak delay %s", d, got, want)
		}
	}
}

// The older consumer had BackOff 30s, 60s, 120s, 240s: the naks of 1, 2, 4
// and 8 s came back at +1, +33, +127 and +345 s.
func TestAnOlderConsumersBackOffDelaysRetriesAsMeasured(t *testing.T) {
	cc := jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxDeliver: 5,
		BackOff: []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second, 240 * time.Second}}
	c := topology.Config{}
	var at time.Duration
	var got []time.Duration
	for d := uint64(1); d <= 4; d++ {
		at += topology.RedeliveryAfter(cc, topology.NakDelayAfter(c, d), d)
		got = append(got, at)
	}
	if want := []time.Duration{time.Second, 33 * time.Second, 127 * time.Second, 345 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("retries at %v, want %v", got, want)
	}
}

func TestTheBudgetIsReadFromTheConsumer(t *testing.T) {
	provisioned := topology.ConsumerConfig(topology.Config{AckWait: 4 * time.Second, MaxDeliver: 8})
	for _, c := range []struct {
		name   string
		cc     jetstream.ConsumerConfig
		budget int
	}{
		{"a consumer provisioned here gives its budget, whatever the flags say", provisioned, 8},
		{"a consumer without metadata and without a limit leaves the flags' budget", jetstream.ConsumerConfig{MaxDeliver: -1}, 3},
		{"an older consumer's limit sets the budget one below it, whatever the flags say, so that every instance counts the same", jetstream.ConsumerConfig{MaxDeliver: 20}, 19},
		{"an older consumer's limit of 3 gives a budget of 2, so that its last delivery is dead-lettered", jetstream.ConsumerConfig{MaxDeliver: 3}, 2},
		{"an older consumer's limit of 2 gives a budget of 1", jetstream.ConsumerConfig{MaxDeliver: 2}, 1},
		{"an older consumer's limit of 1 still leaves one delivery to try", jetstream.ConsumerConfig{MaxDeliver: 1}, 1},
		{"unreadable metadata is ignored", jetstream.ConsumerConfig{MaxDeliver: -1, Metadata: map[string]string{topology.MetaMaxDeliver: "many"}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := topology.FromConsumer(topology.Config{MaxDeliver: 3}, c.cc)
			if got.MaxDeliver != c.budget {
				t.Fatalf("budget %d, want %d", got.MaxDeliver, c.budget)
			}
		})
	}
}

func TestVerifyBoundsCallsByTheDeliveriesThatMayHaveCalled(t *testing.T) {
	for _, c := range []struct {
		name  string
		cc    jetstream.ConsumerConfig
		bound int
	}{
		{"a consumer provisioned here bounds calls by its budget", topology.ConsumerConfig(topology.Config{MaxDeliver: 8}), 8},
		{"an older consumer bounds them by its MaxDeliver, on whose every delivery its executors called", jetstream.ConsumerConfig{MaxDeliver: 5}, 5},
		{"a budget above an older limit is bounded by the limit", jetstream.ConsumerConfig{MaxDeliver: 5, Metadata: map[string]string{topology.MetaMaxDeliver: "9"}}, 5},
		{"a consumer without metadata or a limit bounds nothing", jetstream.ConsumerConfig{MaxDeliver: -1}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := topology.CallBound(c.cc); got != c.bound {
				t.Fatalf("bound %d, want %d", got, c.bound)
			}
		})
	}
}

func TestStreamsAreBoundedToWhatTheGateAccepts(t *testing.T) {
	if topology.MaxEnvelopeBytes != document.Limits.MaxBytes {
		t.Fatalf("MaxEnvelopeBytes %d, the gate's limit %d", topology.MaxEnvelopeBytes, document.Limits.MaxBytes)
	}
	for _, c := range []topology.Config{{}, {MaxBytes: 5 << 20}, {MaxBytes: -1}} {
		want := c.MaxBytes
		switch {
		case want == 0:
			want = topology.DefaultMaxBytes
		case want < 0:
			want = -1
		}
		for _, sc := range []jetstream.StreamConfig{topology.ApprovalsConfig(c), topology.ReceiptsConfig(c), topology.DeadLetterConfig(c)} {
			if sc.MaxMsgSize < topology.MaxEnvelopeBytes || sc.MaxMsgSize > topology.MaxEnvelopeBytes+64<<10 {
				t.Errorf("%s: MaxMsgSize %d", sc.Name, sc.MaxMsgSize)
			}
			if sc.MaxBytes != want || sc.Discard != jetstream.DiscardNew {
				t.Errorf("%s with %d: MaxBytes %d, discard %v; want %d and DiscardNew", sc.Name, c.MaxBytes, sc.MaxBytes, sc.Discard, want)
			}
		}
	}
}
