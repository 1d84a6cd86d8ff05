package topology_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

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

func TestARecordThatDoesNotDecodeOrLacksAPartIsRefusedWithItsReason(t *testing.T) {
	for _, c := range []struct{ name, value, says string }{
		{"junk", `{"streams": `, "does not decode"},
		{"a record without the consumer", `{"streams": {"APPROVALS": {"name": "APPROVALS"}, "RECEIPTS": {"name": "RECEIPTS"}, "DEADLETTERS": {"name": "DEADLETTERS"}}}`, "has no consumer executor"},
		{"a record without a stream", `{"streams": {"APPROVALS": {"name": "APPROVALS"}}, "consumer": {"durable_name": "executor"}}`, "has no stream RECEIPTS"},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			env := testenv.Start(t)
			putInRecordBucket(t, env.JS, topology.RecordKey, c.value)
			_, err := topology.ReadRecord(context.Background(), env.JS)
			if err == nil || errors.Is(err, topology.ErrNoRecord) || !strings.Contains(err.Error(), c.says) {
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

func TestTheTaskServiceRecordIsReadBackAndRefusedWithItsReason(t *testing.T) {
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
	for _, c := range []struct{ name, value, says string }{
		{"junk", `{"kind": `, "does not decode"},
		{"a record without a kind", `{"name": "x"}`, "names no kind"},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			env := testenv.Start(t)
			putInRecordBucket(t, env.JS, topology.TaskServiceKey, c.value)
			_, err := topology.ReadTaskService(context.Background(), env.JS)
			if err == nil || errors.Is(err, topology.ErrNoTaskService) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("reading %s: %v; want an error saying %q", c.name, err, c.says)
			}
		})
	}
}

// shortContext returns a context that ends five seconds from now, or with
// the test.
func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
