package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/testenv"
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

func TestACallReferenceReadsBackAsItsMessageAndDelivery(t *testing.T) {
	ref := topology.CallRef(42, 3, "a1b2")
	if ref != "APPROVALS:42:3:a1b2" {
		t.Fatalf("CallRef = %q", ref)
	}
	if seq, d, ok := topology.ParseCallRef(ref); !ok || seq != 42 || d != 3 {
		t.Fatalf("ParseCallRef(%q) = %d, %d, %v; want 42, 3, true", ref, seq, d, ok)
	}
}

func TestAnythingButACallReferenceIsNotReadAsOne(t *testing.T) {
	for _, ref := range []string{
		"", "APPROVALS:42:3", "APPROVALS:42:3:", "RECEIPTS:42:3:x", "APPROVALS:x:3:a",
		"APPROVALS:42:-1:a", "APPROVALS:42:3:a:b", "someone else's call",
	} {
		if seq, d, ok := topology.ParseCallRef(ref); ok {
			t.Errorf("ParseCallRef(%q) = %d, %d, true; want refused", ref, seq, d)
		}
	}
}

// live reads the three streams' and the consumer's configuration as they
// are now.
func live(t *testing.T, js jetstream.JetStream) (map[string]*jetstream.StreamConfig, *jetstream.ConsumerConfig) {
	t.Helper()
	ctx := shortContext(t)
	streams := map[string]*jetstream.StreamConfig{}
	for _, name := range topology.StreamNames {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := s.CachedInfo().Config
		streams[name] = &sc
	}
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return streams, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	return streams, &cc
}

func TestWhatProvisioningAppliedIsRecordedAndEveryChangeSinceIsADifference(t *testing.T) {
	updateStream := func(name string, change func(*jetstream.StreamConfig)) func(*testing.T, jetstream.JetStream) {
		return func(t *testing.T, js jetstream.JetStream) {
			ctx := shortContext(t)
			s, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			sc := s.CachedInfo().Config
			change(&sc)
			if _, err := js.UpdateStream(ctx, sc); err != nil {
				t.Fatal(err)
			}
		}
	}
	updateConsumer := func(change func(*jetstream.ConsumerConfig)) func(*testing.T, jetstream.JetStream) {
		return func(t *testing.T, js jetstream.JetStream) { testenv.ChangeConsumer(t, js, change) }
	}
	for _, c := range []struct {
		name   string
		change func(*testing.T, jetstream.JetStream)
		want   []string
	}{
		{name: "a topology as provisioned has no difference", change: func(*testing.T, jetstream.JetStream) {}},
		{name: "a lowered max age is a difference",
			change: updateStream(topology.ApprovalsStream, func(sc *jetstream.StreamConfig) { sc.MaxAge, sc.Duplicates = 2*time.Second, time.Second }),
			want:   []string{"stream APPROVALS: max_age: expected 168h0m0s, found 2s", "stream APPROVALS: duplicate_window: expected 2m0s, found 1s"}},
		{name: "a changed byte limit and message limit are differences",
			change: updateStream(topology.ReceiptsStream, func(sc *jetstream.StreamConfig) { sc.MaxBytes, sc.MaxMsgs = 1<<20, 10 }),
			want:   []string{"stream RECEIPTS: max_bytes: expected 1073741824, found 1048576", "stream RECEIPTS: max_msgs: expected -1, found 10"}},
		{name: "a changed discard policy, subject list and duplicate window are differences",
			change: updateStream(topology.DeadLetterStream, func(sc *jetstream.StreamConfig) {
				sc.Discard, sc.Subjects, sc.Duplicates = jetstream.DiscardOld, []string{"deadletters.>", "elsewhere.>"}, time.Second
			}),
			want: []string{"stream DEADLETTERS: discard: expected DiscardNew, found DiscardOld", `stream DEADLETTERS: subjects: expected ["deadletters.>"], found ["deadletters.>","elsewhere.>"]`,
				"stream DEADLETTERS: duplicate_window: expected 2m0s, found 1s"}},
		{name: "a message size raised since, as the streams had it before they were bounded to the largest valid envelope, is a difference",
			change: updateStream(topology.ApprovalsStream, func(sc *jetstream.StreamConfig) { sc.MaxMsgSize = oldApprovalMaxMsg }),
			want:   []string{fmt.Sprintf("stream APPROVALS: max_msg_size: expected %d, found %d", topology.ApprovalMaxMsg, oldApprovalMaxMsg)}},
		{name: "deny delete and deny purge set since are differences",
			change: updateStream(topology.ApprovalsStream, func(sc *jetstream.StreamConfig) { sc.DenyDelete, sc.DenyPurge = true, true }),
			want:   []string{"stream APPROVALS: deny_delete: expected false, found true", "stream APPROVALS: deny_purge: expected false, found true"}},
		{name: "a consumer rewritten to filter nothing with a budget of one is a difference in each field",
			change: updateConsumer(func(cc *jetstream.ConsumerConfig) {
				cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1
			}),
			want: []string{`consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`, "consumer executor: max_deliver: expected -1, found 1"}},
		{name: "a consumer's back-off (and with it its ack wait) and budget metadata changed are differences",
			change: updateConsumer(func(cc *jetstream.ConsumerConfig) {
				// The server takes the first back-off as the ack wait.
				cc.BackOff = []time.Duration{time.Second, time.Minute}
				cc.Metadata[topology.MetaMaxDeliver] = "99"
			}),
			want: []string{"consumer executor: ack_wait: expected 2s, found 1s", "consumer executor: backoff: expected none, found [1s 1m0s]",
				`consumer executor: metadata.sendtwice.max_deliver: expected "4", found "99"`}},
		{name: "a deleted consumer is missing",
			change: func(t *testing.T, js jetstream.JetStream) {
				if err := js.DeleteConsumer(context.Background(), topology.ApprovalsStream, topology.Consumer); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"consumer executor: expected to exist, found none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			c.change(t, env.JS)
			p, err := topology.ReadRecord(context.Background(), env.JS)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Recorded || p.At.IsZero() {
				t.Fatalf("record %+v: want the server's configurations and the time they were applied", p)
			}
			got := p.Diff(live(t, env.JS))
			var lines []string
			for _, d := range got {
				lines = append(lines, d.String())
			}
			all := strings.Join(lines, "\n")
			if len(got) != len(c.want) {
				t.Fatalf("%d differences, want %d:\n%s", len(got), len(c.want), all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("no difference says %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestWithoutARecordTheTopologyIsComparedWithWhatItWouldProvision(t *testing.T) {
	env := testenv.Start(t)
	ctx := shortContext(t)
	if err := env.JS.DeleteKeyValue(ctx, topology.RecordBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.ReadRecord(ctx, env.JS); !errors.Is(err, topology.ErrNoRecord) {
		t.Fatalf("reading a deleted record: %v, want ErrNoRecord", err)
	}
	p := topology.Intended(testenv.Topology)
	if got := p.Diff(live(t, env.JS)); len(got) != 0 {
		t.Fatalf("the topology as provisioned differs from what topology makes of its config: %v", got)
	}
	testenv.ChangeConsumer(t, env.JS, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
	got := topology.Describe(p.Diff(live(t, env.JS)))
	for _, w := range []string{`filter_subject: expected "approvals.>", found "approvals.nothing"`, "max_deliver: expected -1, found 1"} {
		if !strings.Contains(got, w) {
			t.Errorf("no difference says %q: %s", w, got)
		}
	}
}

func TestTheRecordIsKeptWithoutATTL(t *testing.T) {
	env := testenv.Start(t)
	ctx := shortContext(t)
	kv, err := env.JS.KeyValue(ctx, topology.RecordBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 0 || st.BackingStore() != "JetStream" {
		t.Fatalf("bucket %s: TTL %s; want none", topology.RecordBucket, st.TTL())
	}
}

// A provisioning record or a task-service record that does not decode or
// lacks a part is refused with its reason, not taken for a missing one.
func TestARecordThatDoesNotDecodeOrLacksAPartIsRefusedWithItsReason(t *testing.T) {
	provisioning := func(ctx context.Context, js jetstream.JetStream) error {
		_, err := topology.ReadRecord(ctx, js)
		return err
	}
	taskService := func(ctx context.Context, js jetstream.JetStream) error {
		_, err := topology.ReadTaskService(ctx, js)
		return err
	}
	for _, c := range []struct {
		name, key, value, says string
		read                   func(context.Context, jetstream.JetStream) error
		missing                error
	}{
		{"junk as the provisioning record", topology.RecordKey, `{"streams": `, "does not decode", provisioning, topology.ErrNoRecord},
		{"a provisioning record without the consumer", topology.RecordKey, `{"streams": {"APPROVALS": {"name": "APPROVALS"}, "RECEIPTS": {"name": "RECEIPTS"}, "DEADLETTERS": {"name": "DEADLETTERS"}}}`, "has no consumer executor", provisioning, topology.ErrNoRecord},
		{"a provisioning record without a stream", topology.RecordKey, `{"streams": {"APPROVALS": {"name": "APPROVALS"}}, "consumer": {"durable_name": "executor"}}`, "has no stream RECEIPTS", provisioning, topology.ErrNoRecord},
		{"junk as the task-service record", topology.TaskServiceKey, `{"kind": `, "does not decode", taskService, topology.ErrNoTaskService},
		{"a task-service record without a kind", topology.TaskServiceKey, `{"name": "x"}`, "names no kind", taskService, topology.ErrNoTaskService},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			env := testenv.Start(t)
			putInRecordBucket(t, env.JS, c.key, c.value)
			err := c.read(context.Background(), env.JS)
			if err == nil || errors.Is(err, c.missing) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("reading %s: %v; want an error saying %q", c.name, err, c.says)
			}
		})
	}
}

// putInRecordBucket writes value under key in the record bucket, as a role
// that may write there could.
func putInRecordBucket(t *testing.T, js jetstream.JetStream, key, value string) {
	t.Helper()
	ctx := shortContext(t)
	kv, err := js.KeyValue(ctx, topology.RecordBucket)
	if err == nil {
		_, err = kv.Put(ctx, key, []byte(value))
	}
	if err != nil {
		t.Fatalf("writing %s in the record bucket: %v", key, err)
	}
}

func TestTheTaskServiceRecordIsReadBack(t *testing.T) {
	rec := topology.TaskService{Kind: "caldav", Name: "CalDAV collection https://dav.example/alice/tasks/",
		Destinations: map[string]string{"default": "https://dav.example/alice/tasks/"}, CalDAVUser: "alice",
		By: "exec-1", At: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	t.Run("with no bucket, there is no record and nothing is made without create", func(t *testing.T) {
		js := testenv.JetStream(t)
		ctx := shortContext(t)
		if _, err := topology.ReadTaskService(ctx, js); !errors.Is(err, topology.ErrNoTaskService) {
			t.Fatalf("reading with no bucket: %v, want ErrNoTaskService", err)
		}
		if err := topology.RecordTaskService(ctx, js, false, 1, rec); err == nil {
			t.Fatal("recording without create made the bucket")
		}
		if _, err := js.KeyValue(ctx, topology.RecordBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("the bucket after a refused record: %v", err)
		}
	})
	t.Run("a recorded service is read back as it was written, beside the provisioning record", func(t *testing.T) {
		env := testenv.Start(t)
		ctx := shortContext(t)
		if _, err := topology.ReadTaskService(ctx, env.JS); !errors.Is(err, topology.ErrNoTaskService) {
			t.Fatalf("reading before serve recorded: %v, want ErrNoTaskService", err)
		}
		if err := topology.RecordTaskService(ctx, env.JS, false, 1, rec); err != nil {
			t.Fatal(err)
		}
		got, err := topology.ReadTaskService(ctx, env.JS)
		if err != nil || got.Kind != rec.Kind || got.Destinations["default"] != rec.Destinations["default"] || got.CalDAVUser != "alice" || !got.At.Equal(rec.At) || got.By != "exec-1" {
			t.Fatalf("read back %+v, %v; want %+v", got, err, rec)
		}
		if _, err := topology.ReadRecord(ctx, env.JS); err != nil {
			t.Errorf("the provisioning record beside it: %v", err)
		}
	})
}

// shortContext returns a context that ends five seconds from now, or with
// the test.
func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTenantsThatAreNoScopeOrDoNotFitInApprovalsAreRefusedWithTheirReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    topology.Config
		want string
	}{
		{"a tenant that is no caller scope", topology.Config{Tenants: []string{"Tenant-A"}}, `tenant "Tenant-A": not a caller scope`},
		{"a tenant that would be two subject tokens", topology.Config{Tenants: []string{"tenant.a"}}, `tenant "tenant.a": not a caller scope`},
		{"a tenant named twice", topology.Config{Tenants: []string{"a", "b", "a"}}, `tenant "a" named twice`},
		{"a bound that holds no approval of the largest size", topology.Config{Tenants: []string{"a"}, TenantMaxBytes: 1000}, "holds not even one approval"},
		{"bounds that take more than half of APPROVALS", topology.Config{Tenants: []string{"a", "b", "c"}, MaxBytes: 1 << 20, TenantMaxBytes: 256 << 10},
			"3 tenants of 262144 bytes each hold 786432 bytes, more than half of the 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := topology.CheckTenants(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckTenants: %v, want an error saying %q", err, tc.want)
			}
			js := testenv.JetStream(t)
			if _, err := topology.Ensure(shortContext(t), js, tc.c); err == nil {
				t.Fatal("Ensure provisioned them")
			}
			if _, err := js.Stream(shortContext(t), topology.ApprovalsStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("after the refusal, APPROVALS: %v; want none made", err)
			}
		})
	}
	for _, ok := range []topology.Config{
		{},
		{Tenants: []string{"a", "b"}, MaxBytes: 1 << 20, TenantMaxBytes: 256 << 10},
		{Tenants: []string{"a", "b", "c"}, MaxBytes: -1},
	} {
		if err := topology.CheckTenants(ok); err != nil {
			t.Errorf("CheckTenants(%+v): %v", ok, err)
		}
	}
}

// The longest scope and the longest plain intent id make the longest
// source header: an approval of the largest size an intake takes still
// fits in APPROVALS, which would otherwise refuse it and stop the
// tenant's source. Past its bound, the intake refuses the tenant's next
// approval, and APPROVALS holds no more of the tenant than its bound.
func TestATenantsIntakeHoldsItsBoundAndEveryApprovalItTakesReachesApprovals(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	scope := strings.Repeat("s", 64)
	bound := int64(3 * topology.IntakeMaxMsg)
	if _, err := topology.Ensure(ctx, js, topology.Config{Tenants: []string{scope}, TenantMaxBytes: bound}); err != nil {
		t.Fatal(err)
	}
	publish := func(i, size int) error {
		m := nats.NewMsg("intake." + scope + "." + strings.Repeat("i", 127) + string(rune('a'+i)))
		m.Data = make([]byte, size)
		_, err := js.PublishMsg(ctx, m)
		return err
	}
	if err := publish(0, topology.IntakeMaxMsg+1); err == nil || !strings.Contains(err.Error(), "message size exceeds maximum") {
		t.Errorf("a message one byte over the intake's bound: %v, want refused as too large", err)
	}
	stored := 0
	var refused error
	for i := 0; refused == nil && i < 10; i++ {
		if refused = publish(i, topology.IntakeMaxMsg); refused == nil {
			stored++
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes exceeded") || int64(stored*topology.IntakeMaxMsg) > bound {
		t.Fatalf("the intake stored %d approvals of %d bytes, then %v; want it refused past %d bytes", stored, topology.IntakeMaxMsg, refused, bound)
	}
	approvals, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for approvals.CachedInfo().State.Msgs != uint64(stored) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if _, err := approvals.Info(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := approvals.CachedInfo().State; got.Msgs != uint64(stored) || got.Bytes > uint64(bound)+uint64(stored)<<10 {
		t.Fatalf("APPROVALS holds %d messages, %d bytes; want the intake's %d, its bound %d and their source headers", got.Msgs, got.Bytes, stored, bound)
	}
	m, err := approvals.GetLastMsgForSubject(ctx, "approvals."+scope+".>")
	if err != nil {
		t.Fatal(err)
	}
	if from, _, ok := topology.SourcedFrom(m.Header.Get(topology.HeaderStreamSource)); !ok || from != topology.IntakeStream(scope) {
		t.Errorf("the sourced approval on %s names its source %q, want %s", m.Subject, m.Header.Get(topology.HeaderStreamSource), topology.IntakeStream(scope))
	}
}

// A tenant sending the smallest messages it can fills its intake's count
// before its bytes: each approval counts IntakeMsgCost at least, so that
// the receipts its approvals make stay within its bound too.
func TestATenantsIntakeCountsEachApprovalAsOneKiBAtLeast(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	bound := int64(topology.IntakeMaxMsg)
	if _, err := topology.Ensure(ctx, js, topology.Config{Tenants: []string{"tenant-a"}, TenantMaxBytes: bound}); err != nil {
		t.Fatal(err)
	}
	held, most := 0, int(bound/topology.IntakeMsgCost)
	var err error
	for ; err == nil && held <= 2*most; held++ {
		_, err = js.Publish(ctx, "intake.tenant-a.i"+strconv.Itoa(held), []byte("x"))
	}
	if held-1 != most || err == nil || !strings.Contains(err.Error(), "maximum messages exceeded") {
		t.Errorf("the intake of %d bytes held %d approvals of one byte, then %v; want %d, then refused", bound, held-1, err, most)
	}
}

// An executor that provisions names no tenants: it keeps those that
// executor provision --tenants set up, so that no tenant's approvals stop
// reaching APPROVALS.
func TestProvisioningWithoutTenantsKeepsTheTenantsProvisioned(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	for _, c := range []topology.Config{{Tenants: []string{"tenant-a", "tenant-b"}}, {}} {
		if _, err := topology.Ensure(ctx, js, c); err != nil {
			t.Fatal(err)
		}
	}
	// The record holds what the server applied to APPROVALS.
	p, err := topology.ReadRecord(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, src := range p.Streams[topology.ApprovalsStream].Sources {
		got = append(got, src.Name)
	}
	if strings.Join(got, " ") != "INTAKE_tenant-a INTAKE_tenant-b" {
		t.Errorf("APPROVALS sources %v, want both tenants' intakes kept", got)
	}
}
