package deploytest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// consumerState is what a rewrite of the executors' consumer would change:
// its configuration, whether it is paused, and where it stands.
type consumerState struct {
	Config         jetstream.ConsumerConfig
	Paused         bool
	DeliveredSeq   uint64
	AckFloorStream uint64
}

func executorConsumer(t *testing.T, ctx context.Context, pjs jetstream.JetStream) consumerState {
	t.Helper()
	c, err := pjs.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatalf("the executors' consumer: %v", err)
	}
	info := c.CachedInfo()
	return consumerState{Config: info.Config, Paused: info.Paused, DeliveredSeq: info.Delivered.Stream, AckFloorStream: info.AckFloor.Stream}
}

// testConsumerRewrites tries every subject form that creates, updates,
// pauses, resets or deletes a consumer, aimed at the executors' consumer,
// as each role but provisioning, and checks each refused and the consumer
// as provisioned.
func testConsumerRewrites(t *testing.T, ctx context.Context, spies *spyTables, pjs jetstream.JetStream, as map[string]*conn) {
	tbl := spies.table("The executors' consumer",
		"Each subject form that creates, updates, pauses, resets, deletes or pulls a consumer, aimed at `executor` on `APPROVALS` "+
			"(a rewrite sets `filter_subject: approvals.nothing, max_deliver: 1`). After each, the consumer's configuration, pause and "+
			"position are as provisioned. Only provisioning may create or update it; the server takes a consumer's name from the subject "+
			"whenever the subject names one.",
		"role", "form", "subject", "seen")
	spies.add(tbl, "provisioning", "create or update (`executor provision`)", "`$JS.API.CONSUMER.CREATE.APPROVALS.executor`", seenAllowed)
	rewrite := `"filter_subject":"approvals.nothing","max_deliver":1,"ack_policy":"explicit"`
	forms := []struct{ form, subject, body string }{
		{"legacy create, the name in the body", "$JS.API.CONSUMER.CREATE.APPROVALS",
			`{"stream_name":"APPROVALS","config":{"name":"executor",` + rewrite + `}}`},
		{"legacy durable create", "$JS.API.CONSUMER.DURABLE.CREATE.APPROVALS.executor",
			`{"stream_name":"APPROVALS","config":{"durable_name":"executor",` + rewrite + `}}`},
		{"create or update, the name in the subject", "$JS.API.CONSUMER.CREATE.APPROVALS.executor",
			`{"stream_name":"APPROVALS","config":{"name":"executor","durable_name":"executor",` + rewrite + `}}`},
		{"create or update, the name and the filter in the subject", "$JS.API.CONSUMER.CREATE.APPROVALS.executor.approvals.nothing",
			`{"stream_name":"APPROVALS","config":{"name":"executor","durable_name":"executor",` + rewrite + `}}`},
		{"update only", "$JS.API.CONSUMER.CREATE.APPROVALS.executor",
			`{"stream_name":"APPROVALS","config":{"name":"executor","durable_name":"executor",` + rewrite + `},"action":"update"}`},
		{"a literal `*` for the name, the name in the body", "$JS.API.CONSUMER.CREATE.APPROVALS.*",
			`{"stream_name":"APPROVALS","config":{"name":"executor","durable_name":"executor",` + rewrite + `}}`},
		{"a literal `*` for the name, with a filter", "$JS.API.CONSUMER.CREATE.APPROVALS.*.approvals.nothing",
			`{"stream_name":"APPROVALS","config":{"name":"executor",` + rewrite + `}}`},
		{"pause", "$JS.API.CONSUMER.PAUSE.APPROVALS.executor", `{"pause_until":"2999-01-01T00:00:00Z"}`},
		{"reset to a later sequence", "$JS.API.CONSUMER.RESET.APPROVALS.executor", `{"seq":1000000}`},
		{"delete", "$JS.API.CONSUMER.DELETE.APPROVALS.executor", ""},
	}
	// The executors have finished every message, so that nothing but a
	// rewrite moves the consumer.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := pjs.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
		if err != nil {
			t.Fatal(err)
		}
		if info := c.CachedInfo(); info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the executors' consumer still has messages to finish")
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := executorConsumer(t, ctx, pjs)
	for _, role := range []string{"publisher", "executor", "service", "operator"} {
		c := as[role]
		for _, f := range forms {
			a := c.try(t, msg(f.subject, f.body))
			seen := a.seen()
			got := executorConsumer(t, ctx, pjs)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the %s changed the executors' consumer through %s (%s): %+v, was %+v", role, f.subject, seen, got, want)
				seen = "CHANGED the consumer"
				want = got
			} else if seen == seenAllowed {
				t.Errorf("the %s on %s was answered without an error, although the consumer stayed as it was", role, f.subject)
			}
			spies.add(tbl, role, f.form, "`"+f.subject+"`", seen)
		}
	}

	// Pulling takes the executors' deliveries away from them.
	for _, role := range []string{"publisher", "service", "operator"} {
		subject := "$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor"
		a := as[role].try(t, msg(subject, `{"batch":1,"no_wait":true}`))
		if !a.refused {
			t.Errorf("the %s pulling the executors' consumer: %s, want refused", role, a.seen())
		}
		spies.add(tbl, role, "pull (take its deliveries)", "`"+subject+"`", a.seen())
	}
}

// testNoConsumers tries every way a client creates a consumer on each
// stream, as the publisher, and one as the executor and the service, and
// checks each refused and the streams' consumers as they were.
func testNoConsumers(t *testing.T, ctx context.Context, spies *spyTables, pjs jetstream.JetStream, pub, ex, svc *conn) {
	tbl := spies.table("Consumers the publisher (and the executor and the service) tried to create",
		"None may create one. The publisher reads its receipts without a consumer; the number of consumers on every stream is unchanged after each attempt.",
		"role", "form", "stream", "seen")
	streams := []string{topology.ReceiptsStream, topology.ApprovalsStream, topology.DeadLetterStream}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, name := range streams {
			s, err := pjs.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = s.CachedInfo().State.Consumers
		}
		return out
	}
	before := counts()
	filter := func(stream string) string {
		return map[string]string{topology.ReceiptsStream: "receipts.default.intent-0001", topology.ApprovalsStream: "approvals.default.intent-0001",
			topology.DeadLetterStream: "deadletters.default.intent-0001"}[stream]
	}
	// client makes a consumer through nats.go's jetstream package: the
	// subject holds a generated name, so the violation is matched by prefix.
	client := func(c *conn, stream string, create func(context.Context, jetstream.JetStream) error) string {
		cjs, _ := jetstream.New(c.Conn)
		since := c.mark()
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := create(cctx, cjs)
		cancel()
		if err == nil {
			return "CREATED a consumer"
		}
		if c.awaitViolation(since, `Publish to "$JS.API.CONSUMER.CREATE.`+stream+`.`) {
			return seenRefused
		}
		return "refused: " + err.Error()
	}
	type attempt struct {
		form string
		do   func(c *conn, stream string) string
	}
	attempts := []attempt{
		{"ordered consumer on one intent's subject (`jetstream.OrderedConsumer`, what `send --wait` used)", func(c *conn, stream string) string {
			return client(c, stream, func(ctx context.Context, js jetstream.JetStream) error {
				cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter(stream)}})
				if err != nil {
					return err
				}
				_, err = cons.Info(ctx)
				return err
			})
		}},
		{"ephemeral consumer (`jetstream.CreateConsumer`)", func(c *conn, stream string) string {
			return client(c, stream, func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
				return err
			})
		}},
		{"durable consumer (`jetstream.CreateOrUpdateConsumer`)", func(c *conn, stream string) string {
			return client(c, stream, func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "spy", AckPolicy: jetstream.AckNonePolicy})
				return err
			})
		}},
		{"durable consumer, the filter in the subject", func(c *conn, stream string) string {
			return c.try(t, msg("$JS.API.CONSUMER.CREATE."+stream+".spy."+filter(stream),
				`{"stream_name":"`+stream+`","config":{"durable_name":"spy","filter_subject":"`+filter(stream)+`","ack_policy":"none"}}`)).seen()
		}},
		{"legacy create, the name in the body", func(c *conn, stream string) string {
			return c.try(t, msg("$JS.API.CONSUMER.CREATE."+stream, `{"stream_name":"`+stream+`","config":{"name":"spy","ack_policy":"none"}}`)).seen()
		}},
		{"legacy durable create", func(c *conn, stream string) string {
			return c.try(t, msg("$JS.API.CONSUMER.DURABLE.CREATE."+stream+".spy",
				`{"stream_name":"`+stream+`","config":{"durable_name":"spy","ack_policy":"none"}}`)).seen()
		}},
	}
	check := func(role, form, stream, seen string) {
		if after := counts(); !reflect.DeepEqual(after, before) {
			t.Errorf("the %s's %s on %s: consumers %v, were %v", role, form, stream, after, before)
			seen = "CREATED a consumer"
			before = after
		}
		if seen != seenRefused {
			t.Errorf("the %s's %s on %s: %s, want %s", role, form, stream, seen, seenRefused)
		}
		spies.add(tbl, role, form, stream, seen)
	}
	for _, a := range attempts {
		for _, stream := range streams {
			check("publisher", a.form, stream, a.do(pub, stream))
		}
	}
	for _, c := range []*conn{ex, svc} {
		a := attempts[1]
		check(c.role, a.form, topology.ReceiptsStream, a.do(c, topology.ReceiptsStream))
	}
}

// An injection target: a subject of one stream, named as a reply subject.
type target struct {
	column, prefix, stream string
	// service: the stream lives in the service's account.
	service bool
}

var targets = []target{
	{"`approvals.…` (APPROVALS)", "approvals.spy-", topology.ApprovalsStream, false},
	{"`receipts.…` (RECEIPTS)", "receipts.spy-", topology.ReceiptsStream, false},
	{"`deadletters.…` (DEADLETTERS)", "deadletters.spy-", topology.DeadLetterStream, false},
	{"`$KV.sendtwice-topology.…`", "$KV." + topologyBucket + ".spy-", "KV_" + topologyBucket, false},
	{"`$KV.sendtwice-intents.…`", "$KV." + ledger.Bucket + ".spy-", "KV_" + ledger.Bucket, false},
	{"`$KV.fake-task-provider-lease.…`", "$KV." + provider.LeaseBucket + ".spy-", "KV_" + provider.LeaseBucket, true},
}

// mayPublish says into which streams a role may store messages by its
// job: the only ones a reply it names may reach. ownAccount says which of
// those live in the role's own account, where the server delivers a reply
// subject as it is: there the answer must be found stored, which shows
// that the test sees an answer stored when there is one.
var (
	mayPublish = map[string]map[string]bool{
		"provisioning": {topology.ApprovalsStream: true, topology.ReceiptsStream: true, topology.DeadLetterStream: true, "KV_" + topologyBucket: true, "KV_" + ledger.Bucket: true},
		"publisher":    {topology.ApprovalsStream: true},
		"tenant-a":     {topology.ApprovalsStream: true},
		"executor":     {topology.ReceiptsStream: true, topology.DeadLetterStream: true, "KV_" + ledger.Bucket: true},
		"operator":     {topology.ApprovalsStream: true},
		"service":      {"KV_" + provider.LeaseBucket: true},
	}
	ownAccount = map[string]map[string]bool{
		"provisioning": mayPublish["provisioning"],
		"service":      mayPublish["service"],
	}
)

// testReplyInjection has each role make each kind of request it can with
// its reply subject set to a subject of each stream, and checks where the
// answer was stored: only in a stream the role may publish to.
func testReplyInjection(t *testing.T, ctx context.Context, spies *spyTables, pjs, sjs jetstream.JetStream, as map[string]*conn) {
	header := []string{"role", "request"}
	for _, tg := range targets {
		header = append(header, tg.column)
	}
	tbl := spies.table("Reply subjects aimed at the streams",
		"Each request the role can make, sent with its reply subject set to a subject of each stream: was the answer stored there? "+
			"Only where the stream lives in the role's own account (provisioning's streams; the service's own lease bucket), "+
			"which shows the check sees an answer that is stored. Every other answer is delivered in the requester's own account, "+
			"which holds no stream; the test fails if one is stored in a stream the role may not publish to.",
		header...)

	// The operator's own consumer, as status and verify make one.
	ojs, _ := jetstream.New(as["operator"].Conn)
	if _, err := ojs.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Name: "spy-operator",
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute}); err != nil {
		t.Fatalf("the operator could not create a consumer of its own: %v", err)
	}
	wrongStream := func(subject string) *nats.Msg {
		m := msg(subject, `{}`)
		// The stream refuses it, stores nothing, and answers an error.
		m.Header.Set(jetstream.ExpectedStreamHeader, "NO-SUCH-STREAM")
		return m
	}
	nextNoWait := `{"batch":1,"no_wait":true}`
	vias := []struct {
		role, request string
		m             *nats.Msg
	}{
		{"provisioning", "JetStream API (`$JS.API.INFO`)", msg("$JS.API.INFO", "")},

		{"publisher", "direct get on RECEIPTS", msg("$JS.API.DIRECT.GET.RECEIPTS."+subjects.Receipt("", "intent-0001"), "")},
		{"publisher", "JetStream API (`STREAM.INFO.RECEIPTS`)", msg("$JS.API.STREAM.INFO.RECEIPTS", "")},
		{"publisher", "publish onto APPROVALS, the ack to the reply", wrongStream("approvals.spy")},
		{"publisher", "pull a consumer on RECEIPTS (`MSG.NEXT`)", msg("$JS.API.CONSUMER.MSG.NEXT.RECEIPTS.spy-operator", nextNoWait)},
		{"publisher", "task service (`fake-task-provider.create`)", msg(provider.SubjectCreate, `{}`)},

		{"tenant-a", "direct get on RECEIPTS, its own scope", msg("$JS.API.DIRECT.GET.RECEIPTS."+subjects.Receipt("tenant-a", "intent-0002"), "")},
		{"tenant-a", "publish onto APPROVALS, its own scope, the ack to the reply", wrongStream(subjects.Approval("tenant-a", "spy"))},

		{"executor", "pull its consumer (`MSG.NEXT.APPROVALS.executor`)", msg("$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor", nextNoWait)},
		{"executor", "`MSG.GET` on RECEIPTS", msg("$JS.API.STREAM.MSG.GET.RECEIPTS", `{"last_by_subj":"receipts.default.intent-0001"}`)},
		{"executor", "JetStream API (`CONSUMER.INFO.APPROVALS.executor`)", msg("$JS.API.CONSUMER.INFO.APPROVALS.executor", "")},
		{"executor", "publish onto RECEIPTS, the ack to the reply", wrongStream("receipts.spy")},
		{"executor", "task service (`fake-task-provider.create`)", msg(provider.SubjectCreate, `{}`)},
		{"executor", "write an intent ledger entry, the ack to the reply", wrongStream("$KV." + ledger.Bucket + ".spy")},

		{"operator", "pull its own consumer on RECEIPTS (`MSG.NEXT`)", msg("$JS.API.CONSUMER.MSG.NEXT.RECEIPTS.spy-operator", nextNoWait)},
		{"operator", "`MSG.GET` on DEADLETTERS", msg("$JS.API.STREAM.MSG.GET.DEADLETTERS", `{"seq":1}`)},
		{"operator", "JetStream API (`STREAM.INFO.APPROVALS`)", msg("$JS.API.STREAM.INFO.APPROVALS", "")},
		{"operator", "publish onto APPROVALS, the ack to the reply", wrongStream("approvals.spy")},
		{"operator", "task service (`fake-task-provider.stats`)", msg(provider.SubjectStats, "")},

		{"service", "JetStream API of its own account (`$JS.API.INFO`)", msg("$JS.API.INFO", "")},
		{"service", "micro `PING`, answered by the service itself", msg("$SRV.PING.fake-task-provider", "")},
		{"service", "publish its lease, the ack to the reply", wrongStream("$KV." + provider.LeaseBucket + ".lease")},
	}
	stored := func(tg target, subject string) bool {
		js := pjs
		if tg.service {
			js = sjs
		}
		s, err := js.Stream(ctx, tg.stream)
		if err != nil {
			t.Fatalf("stream %s: %v", tg.stream, err)
		}
		_, err = s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false
		}
		if err != nil {
			t.Fatalf("looking for %s in %s: %v", subject, tg.stream, err)
		}
		return true
	}
	// First every attack, each followed by the same request answered on the
	// role's own inbox; then the checks, once every stream has stored a
	// message sent after all the attacks.
	type check struct {
		row, col    int
		tg          target
		subject     string
		refused     bool
		may, must   bool
		role, about string
	}
	var checks []check
	rows := make([][]string, len(vias))
	for i, v := range vias {
		c := as[v.role]
		rows[i] = []string{v.role, v.request}
		first := c.try(t, v.m)
		if !first.refused && (first.msg == nil || first.seen() == seenNoResponders) {
			t.Fatalf("the %s's %s: %s; the request must be answered for the attempt to mean anything", v.role, v.request, first.seen())
		}
		for k, tg := range targets {
			subject := fmt.Sprintf("%s%s-%d", tg.prefix, v.role, i)
			since := c.mark()
			attack := &nats.Msg{Subject: v.m.Subject, Reply: subject, Header: v.m.Header, Data: v.m.Data}
			if err := c.PublishMsg(attack); err != nil {
				t.Fatal(err)
			}
			_ = c.Flush()
			ck := check{row: i, col: 2 + k, tg: tg, subject: subject, refused: first.refused, role: v.role, about: v.request,
				may: mayPublish[v.role][tg.stream], must: ownAccount[v.role][tg.stream]}
			if first.refused {
				// Refused by subject: the reply was never looked at.
				if !c.awaitViolation(since, `Publish to "`+v.m.Subject+`"`) {
					t.Errorf("the %s's %s with reply %s was not refused as the same request was", v.role, v.request, subject)
				}
				ck.may, ck.must = false, false
			} else if again := c.try(t, v.m); again.msg == nil {
				t.Fatalf("the %s's %s: no second answer (%s)", v.role, v.request, again.seen())
			}
			checks = append(checks, ck)
			rows[i] = append(rows[i], "")
		}
	}
	// A message stored in every stream after all the attacks, by a role
	// that may: a stream stores what it receives in order. (The service's
	// lease bucket is left out: the service may write only its lease, which
	// it renews every few seconds.)
	sentinelBy := map[string]string{topology.ApprovalsStream: "publisher", topology.ReceiptsStream: "executor",
		topology.DeadLetterStream: "executor", "KV_" + topologyBucket: "provisioning", "KV_" + ledger.Bucket: "executor"}
	for _, tg := range targets {
		if tg.service {
			continue
		}
		js, _ := jetstream.New(as[sentinelBy[tg.stream]].Conn)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.Publish(sctx, tg.prefix+"sentinel", []byte("after the attacks"))
		cancel()
		if err != nil {
			t.Fatalf("storing a sentinel in %s: %v", tg.stream, err)
		}
	}
	for _, ck := range checks {
		got := stored(ck.tg, ck.subject)
		for deadline := time.Now().Add(3 * time.Second); ck.must && !got && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			got = stored(ck.tg, ck.subject)
		}
		switch {
		case got && !ck.may:
			t.Errorf("the %s's %s with reply %s: the answer was stored in %s, which the %s may not publish to", ck.role, ck.about, ck.subject, ck.tg.stream, ck.role)
		case ck.must && !got:
			t.Errorf("the %s's %s with reply %s: the answer was not stored in %s of the role's own account; the check cannot see a stored answer", ck.role, ck.about, ck.subject, ck.tg.stream)
		}
		seen := seenNotStored
		switch {
		case got:
			seen = seenStored
		case ck.refused:
			seen = seenRefused
		}
		rows[ck.row][ck.col] = seen
	}
	for _, r := range rows {
		spies.add(tbl, r...)
	}
}
