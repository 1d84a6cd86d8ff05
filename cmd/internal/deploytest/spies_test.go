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

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
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

// testTenants shows deploy/auth's example tenants confined to their caller
// scopes (each user's scope is its name): each sends an approval of its own
// scope and reads its receipt, live and stored, with the publisher's own
// code; neither may publish an approval on the other's scope, subscribe to
// the other's receipts or read them stored; and an approval of the other's
// scope published on its own subject is refused by the executors' gate,
// its receipt filed in the sender's own scope, the task service not called.
func testTenants(t *testing.T, ctx context.Context, spies *spyTables, url string, pw map[string]string, s *scenario.Seed,
	counts func() provider.Counts) {
	tbl := spies.table("Tenants",
		"deploy/auth's example tenants `tenant-a` and `tenant-b`: publishers of one caller scope each (the scope of their name), "+
			"each in an account of its own, whose approvals an intake stream of its own (`INTAKE_<scope>`, bounded) stores and APPROVALS sources. "+
			"A key's subjects name its scope first, so a permission on `approvals.<scope>.>`, "+
			"`receipts.<scope>.>` and `$JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.>` confines a tenant to its scope. "+
			"Each row is seen for both tenants, `<own>` being its scope and `<other>` the other's.",
		"role", "action", "subjects", "seen")
	row := func(role, action, subjects, seen string) { spies.add(tbl, role, action, subjects, seen) }
	intent := document.Identify(s.NewIntent.Envelope()).IntentID

	type tenant struct {
		name string
		c    *conn
		js   jetstream.JetStream
		seq  uint64 // its own approval's stream sequence
		rc   *testenv.Receipt
	}
	var ts []*tenant
	for _, name := range tenants {
		c := connectAs(t, url, name, pw[name])
		js, _ := jetstream.New(c.Conn)
		ts = append(ts, &tenant{name: name, c: c, js: js})
	}

	// Each sends an approval of its own scope and reads its receipt.
	for _, me := range ts {
		a, err := s.InScope(s.NewIntent, me.name)
		if err != nil {
			t.Fatal(err)
		}
		since := me.c.mark()
		w := watchReceipts(t, me.js, me.name, intent)
		sent, err := testenv.Publish(ctx, me.js, a.Envelope())
		if err != nil {
			t.Fatalf("%s could not publish an approval of its own scope: %v", me.name, err)
		}
		if want := subjects.Approval(me.name, intent); sent.Subject != want {
			t.Fatalf("%s published on %s, want %s", me.name, sent.Subject, want)
		}
		me.seq = sent.StreamSeq
		if me.rc, err = w.await(ctx, sent.StreamSeq); err != nil {
			t.Fatalf("%s could not read its receipt: %v", me.name, err)
		}
		// One intent id in two scopes is two keys: each tenant's first
		// send creates a task of its own.
		if me.rc.Outcome != document.OutcomeCreated || me.rc.Delivery.StreamSeq != sent.StreamSeq || me.rc.Scope != me.name {
			t.Fatalf("%s's receipt: %s, want its message created in its own scope", me.name, me.rc.Raw)
		}
		// The stored lookup alone: a new watch, after the receipt was stored.
		stored, err := testenv.WaitReceipt(ctx, me.js, me.name, intent, sent.StreamSeq)
		if err != nil || stored.ReceiptID != me.rc.ReceiptID {
			t.Fatalf("%s reading its stored receipt: %+v, %v; want %s", me.name, stored, err, me.rc.ReceiptID)
		}
		if me.c.violation(since, "") {
			t.Fatalf("the server refused %s something in its own scope: %v", me.name, me.c.errs[since:])
		}
		row(me.name, "publish an approval of its own scope, wait for its receipt (subscribe before publishing), read it again stored",
			"`approvals.<own>.<intent>` and its ack (from `INTAKE_<own>`); its APPROVALS sequence by `$JS.API.DIRECT.GET.APPROVALS.approvals.<own>.<intent>`; "+
				"subscribe `receipts.<own>.<intent>`; `$JS.API.DIRECT.GET.RECEIPTS.receipts.<own>.<intent>`", seenAllowed)
	}

	for i, me := range ts {
		other := ts[1-i]
		t.Run(me.name+" may not publish an approval of "+other.name+"'s scope", func(t *testing.T) {
			a, err := s.InScope(s.NewIntent, other.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, try := range []struct{ action, subject, shown string }{
				{"publish an approval of the other's scope", subjects.Approval(other.name, intent), "`approvals.<other>.<intent>`"},
				{"publish an approval of the default scope", subjects.Approval("", intent), "`approvals.default.<intent>`"},
				{"publish onto a stream", subjects.Receipt(me.name, intent), "`receipts.<own>.<intent>`"},
				{"publish onto a stream", subjects.DeadLetter(me.name, intent), "`deadletters.<own>.<intent>`"},
			} {
				m := msg(try.subject, "")
				m.Data = a.Envelope()
				got := me.c.try(t, m)
				if !got.refused {
					t.Errorf("%s on %s: %s, want refused", me.name, try.subject, got.seen())
				}
				row(me.name, try.action, try.shown, got.seen())
			}
		})

		t.Run(me.name+"'s approval of "+other.name+"'s scope on its own subject is refused by the gate", func(t *testing.T) {
			a, err := s.InScope(s.NewIntent, other.name)
			if err != nil {
				t.Fatal(err)
			}
			before := counts()
			w := watchReceipts(t, me.js, me.name, intent)
			m := nats.NewMsg(subjects.Approval(me.name, intent))
			m.Data = a.Envelope()
			ack, err := me.js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatalf("%s publishing on its own subject: %v", me.name, err)
			}
			rc, err := w.await(ctx, sourcedSeq(ctx, t, me.c.Conn, m.Subject, ack))
			if err != nil {
				t.Fatalf("no receipt in %s's own scope: %v", me.name, err)
			}
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckEnvelope {
				t.Fatalf("receipt %s, want rejected at %s", rc.Raw, gate.CheckEnvelope)
			}
			if after := counts(); after != before {
				t.Fatalf("the task service was called: counts %+v, were %+v", after, before)
			}
			row(me.name, "publish an approval of the other's scope on its own scope's subject",
				"`approvals.<own>.<intent>`, the request naming `<other>`",
				"rejected by the gate at `envelope`, the receipt in `receipts.<own>.<intent>`; the task service not called")
		})

		t.Run(me.name+" may not read "+other.name+"'s receipts", func(t *testing.T) {
			otherSubject := subjects.Receipt(other.name, intent)
			for _, subject := range []string{otherSubject, "receipts." + other.name + ".>", "receipts.*." + intent, "receipts.>"} {
				could := me.c.canSubscribe(t, subject)
				if could {
					t.Errorf("%s subscribed to %s", me.name, subject)
				}
				shown := map[string]string{otherSubject: "`receipts.<other>.<intent>`", "receipts." + other.name + ".>": "`receipts.<other>.>`",
					"receipts.*." + intent: "`receipts.*.<intent>`", "receipts.>": "`receipts.>`"}[subject]
				seen := seenRefused
				if could {
					seen = seenAllowed
				}
				row(me.name, "subscribe to receipts (the live subscription)", "subscribe "+shown, seen)
			}
			direct := "$JS.API.DIRECT.GET." + topology.ReceiptsStream + "."
			approvalsDirect := "$JS.API.DIRECT.GET." + topology.ApprovalsStream + "."
			for _, try := range []struct {
				action, subject, body, shown string
			}{
				{"read the other's stored receipt (direct get)", direct + otherSubject, "", "`" + direct + "receipts.<other>.<intent>`"},
				{"read any scope's stored receipt (direct get, a wildcard scope)", direct + "receipts.*." + intent, "", "`" + direct + "receipts.*.<intent>`"},
				{"read any stored receipt (direct get, a wildcard subject)", direct + "receipts.>", "", "`" + direct + "receipts.>`"},
				{"read the other's stored receipt (direct get, the subject in the body)", "$JS.API.DIRECT.GET." + topology.ReceiptsStream,
					`{"last_by_subj":"` + otherSubject + `"}`, "`$JS.API.DIRECT.GET.RECEIPTS`"},
				{"read the other's stored receipt (`MSG.GET`, the subject in the body)", "$JS.API.STREAM.MSG.GET." + topology.ReceiptsStream,
					`{"last_by_subj":"` + otherSubject + `"}`, "`$JS.API.STREAM.MSG.GET.RECEIPTS`"},
				{"read the other's stored approval (direct get)", approvalsDirect + subjects.Approval(other.name, intent), "",
					"`" + approvalsDirect + "approvals.<other>.<intent>`"},
			} {
				got := me.c.try(t, msg(try.subject, try.body))
				if !got.refused {
					t.Errorf("%s on %s: %s, want refused", me.name, try.subject, got.seen())
				}
				row(me.name, try.action, try.shown, got.seen())
			}
			// Its own answers stay its own: neither the publishers nor the
			// other tenant read them on an _INBOX.> of theirs.
			listeners := map[string]*conn{"publisher": connectAs(t, url, "publisher", pw["publisher"]), other.name: connectAs(t, url, other.name, pw[other.name])}
			subs := map[string]*nats.Subscription{}
			for who, c := range listeners {
				sub, err := c.SubscribeSync("_INBOX.>")
				if err != nil {
					t.Fatal(err)
				}
				_ = c.Flush()
				subs[who] = sub
			}
			mine := me.c.try(t, msg(direct+subjects.Receipt(me.name, intent), ""))
			if mine.msg == nil || mine.seen() != seenAllowed {
				t.Fatalf("%s reading its own stored receipt: %s", me.name, mine.seen())
			}
			seen := "seen by neither"
			for who, sub := range subs {
				for {
					m, err := sub.NextMsg(500 * time.Millisecond)
					if err != nil {
						break
					}
					if m.Subject == mine.msg.Subject {
						t.Errorf("the %s read %s's answer on %s", who, me.name, m.Subject)
						seen = "seen by the " + who
					}
				}
			}
			row(me.name, "read its own stored receipt while the publisher and the other tenant listen on `_INBOX.>`",
				"`"+direct+"receipts.<own>.<intent>`, answered on its inbox", seen)

			// And with the publisher's own code: no receipt of the other's
			// message, although it is stored.
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			rc, err := testenv.WaitReceipt(wctx, me.js, other.name, intent, other.seq)
			if !errors.Is(err, send.ErrNoReceipt) {
				t.Errorf("%s waiting for %s's receipt: %+v, %v; want no receipt", me.name, other.name, rc, err)
			}
		})
	}
}
