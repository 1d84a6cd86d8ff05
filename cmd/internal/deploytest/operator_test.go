package deploytest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/cmd/internal/verify"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// authPipeline is deploy/auth with a task service that uses the
// executors' intent ledger: provisioned by executor provision as
// provisioning, served by executor serve as executor (--no-provision),
// each run in this process with its own user.
type authPipeline struct {
	url string
	pw  map[string]string
	// serviceFlags name the task service, as serve, status and verify
	// take them.
	serviceFlags []string
}

// runCommand parses args into the flags define makes and runs the command
// with them.
func runCommand[C any](define func(*flag.FlagSet) *C, run func(*C) error, args ...string) error {
	fs := flag.NewFlagSet("deploytest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cf := define(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return run(cf)
}

// login are the connection flags of role.
func (p *authPipeline) login(role string) []string {
	return []string{"--server", p.url, "--user", role, "--password", p.pw[role]}
}

// startAuthPipeline provisions deploy/auth and serves the task service
// of serviceFlags until the test ends.
func startAuthPipeline(t *testing.T, serviceFlags ...string) *authPipeline {
	t.Helper()
	return startAuthPipelineProvisioned(t, nil, serviceFlags...)
}

// startAuthPipelineProvisioned is startAuthPipeline with provisionFlags
// given to executor provision.
func startAuthPipelineProvisioned(t *testing.T, provisionFlags []string, serviceFlags ...string) *authPipeline {
	t.Helper()
	url, pw := authServer(t)
	p := &authPipeline{url: url, pw: pw, serviceFlags: serviceFlags}
	var out bytes.Buffer
	if err := runCommand(serve.ProvisionFlagsVar, func(c *serve.ProvisionConfig) error {
		return serve.Provision(context.Background(), c, &out, &out)
	}, append(p.login("provisioning"), provisionFlags...)...); err != nil {
		t.Fatalf("executor provision as provisioning: %v\n%s", err, out.String())
	}
	ctx, stop := context.WithCancel(context.Background())
	var log testenv.Buffer
	done := make(chan error, 1)
	args := append(append(p.login("executor"), "--no-provision", "--insecure-allow-unsigned", "--id", "exec-1",
		"--call-timeout", "10s", "--log-level", "warn"), serviceFlags...)
	go func() {
		done <- runCommand(serve.FlagsVar, func(f *serve.Config) error { return serve.Run(ctx, f, &log) }, args...)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil || t.Failed() {
			t.Logf("executor serve as executor: %v\n%s", err, log.String())
		}
	})
	return p
}

// send publishes the seed's approval as the publisher and waits for its
// receipt: created.
func (p *authPipeline) send(t *testing.T, s *scenario.Seed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, _ := jetstream.New(connectAs(t, p.url, "publisher", p.pw["publisher"]).Conn)
	w := watchReceipts(t, js, "", document.Identify(s.Original.Envelope()).IntentID)
	sent, err := testenv.Publish(ctx, js, s.Original.Envelope())
	if err != nil {
		t.Fatalf("the publisher could not publish: %v", err)
	}
	rc, err := w.await(ctx, sent.StreamSeq)
	if err != nil || rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the approval's receipt: %+v, %v; want created", rc, err)
	}
}

// statusAndVerify runs executor status and executor verify as the
// operator, and fails the test unless both succeed.
func (p *authPipeline) statusAndVerify(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(p.login("operator"), p.serviceFlags...)
	var out bytes.Buffer
	err := runCommand(service.StatusFlagsVar, func(c *service.StatusConfig) error { return service.Status(ctx, c, &out, &out) }, args...)
	if err != nil || !strings.Contains(out.String(), "tasks:") {
		t.Errorf("executor status as the operator: %v\n%s", err, out.String())
	}
	out.Reset()
	err = runCommand(verify.FlagsVar, func(c *verify.Config) error { return verify.Run(ctx, c, &out, &out) }, append(args, "--timeout", "20s")...)
	if err != nil {
		t.Errorf("executor verify as the operator: %v\n%s", err, out.String())
	}
}

// startRadicalePipeline is deploy/auth serving a CalDAV collection on
// Radicale: the executors keep the keys of its deleted tasks in the intent
// ledger.
func startRadicalePipeline(t *testing.T) (*authPipeline, *scenario.Seed) {
	t.Helper()
	dav := davtest.Start(t, davtest.Radicale, davtest.Options{})
	return startAuthPipeline(t, "--task-service", "caldav", "--caldav-url", dav.CollectionURL), testenv.SeedFor(t, scenario.CalDAV)
}

// status and verify open the intent ledger where the executors keep
// Redmine's per-key locks; under deploy/auth the operator had no access
// to it, and both failed for Redmine. CalDAV's listing does not open it
// (its executors keep the keys of deleted tasks there): its row shows the
// ledger in use by the executors, and the operator's commands working
// beside it.
func TestTheOperatorRunsStatusAndVerifyUnderDeployAuthWithTheIntentLedgerInUse(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T) (*authPipeline, *scenario.Seed)
	}{
		{"caldav on Radicale", startRadicalePipeline},
		{"redmine, its locks in the ledger", func(t *testing.T) (*authPipeline, *scenario.Seed) {
			redminetest.Require(t)
			srv := redminetest.Start(t, redminetest.Options{})
			// serve, status and verify, all in this process, read it.
			t.Setenv(service.RedmineAPIKeyEnv, srv.APIKey)
			return startAuthPipeline(t, "--task-service", "redmine", "--redmine-url", srv.URL, "--redmine-project", srv.Project,
				"--redmine-field", srv.FieldName), testenv.SeedFor(t, scenario.Redmine)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, seed := c.start(t)
			p.send(t, seed)
			p.statusAndVerify(t)
		})
	}
}

// A tenant that could make durable consumers up to the streams' cap would
// leave the operator none for the consumers status and verify read the
// streams with. A tenant waits for its receipts by subscription and direct
// get and creates no consumer: every form of create is refused, one past
// the cap included, and the operator's status and verify work after.
func TestATenantTryingToFillTheConsumerCapIsRefusedAndTheOperatorsStatusAndVerifyStillWork(t *testing.T) {
	p, seed := startRadicalePipeline(t)
	p.send(t, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pjs, _ := jetstream.New(connectAs(t, p.url, "provisioning", p.pw["provisioning"]).Conn)
	streams := []string{topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream}
	consumers := func() string {
		var n []string
		for _, name := range streams {
			s, err := pjs.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			n = append(n, name+" "+strconv.Itoa(s.CachedInfo().State.Consumers))
		}
		return strings.Join(n, ", ")
	}
	before := consumers()
	// deploy/auth's max_consumers: how many consumers each stream holds.
	account, err := pjs.AccountInfo(ctx)
	if err != nil || account.Limits.MaxConsumers <= 0 {
		t.Fatalf("the account's consumer cap: %+v, %v; want one set", account, err)
	}
	maxConsumers := account.Limits.MaxConsumers
	tenant := connectAs(t, p.url, "tenant-a", p.pw["tenant-a"])
	for _, stream := range streams {
		durable := `{"stream_name":"` + stream + `","config":{"durable_name":"fill","ack_policy":"none"}}`
		for _, subject := range []string{
			"$JS.API.CONSUMER.CREATE." + stream + ".fill",
			"$JS.API.CONSUMER.CREATE." + stream + ".fill.receipts.tenant-a.>",
			"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".fill",
			"$JS.API.CONSUMER.CREATE." + stream,
		} {
			if a := tenant.try(t, msg(subject, durable)); !a.refused {
				t.Errorf("tenant-a creating a durable consumer on %s: %s, want refused", subject, a.seen())
			}
		}
	}
	// One past the cap, as fast as it can send them.
	since := tenant.mark()
	for i := range maxConsumers + 1 {
		name := "fill-" + strconv.Itoa(i)
		_ = tenant.Publish("$JS.API.CONSUMER.CREATE."+topology.ReceiptsStream+"."+name,
			[]byte(`{"stream_name":"RECEIPTS","config":{"durable_name":"`+name+`","ack_policy":"none"}}`))
	}
	_ = tenant.Flush()
	if !tenant.awaitViolation(since, `"$JS.API.CONSUMER.CREATE.RECEIPTS.fill-`+strconv.Itoa(maxConsumers)+`"`) {
		t.Errorf("tenant-a's create number %d was not refused", maxConsumers+1)
	}
	if after := consumers(); after != before {
		t.Errorf("consumers per stream: %s, were %s", after, before)
	}
	p.statusAndVerify(t)
}

// $JS.API.INFO answers with the account's totals: every tenant's messages,
// bytes and API calls together, since all streams live in one account. A
// tenant's own commands never ask for it; its request is refused.
func TestATenantAskingForTheAccountsTrafficFiguresIsRefused(t *testing.T) {
	url, pw := authServer(t)
	for _, role := range tenants {
		c := connectAs(t, url, role, pw[role])
		for _, subject := range []string{"$JS.API.INFO", "$JS.API.STREAM.INFO." + topology.ReceiptsStream,
			"$JS.API.STREAM.INFO." + topology.ApprovalsStream, "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES"} {
			if a := c.try(t, msg(subject, "")); !a.refused {
				t.Errorf("%s asking %s: %s, want refused", role, subject, a.seen())
			}
		}
	}
}

// A tenant that sends envelopes of the largest size the stream takes, as
// fast as it can, filled APPROVALS, and every other tenant's send then
// failed "maximum bytes exceeded". Each tenant's approvals now go through
// an intake stream of its own, bounded by --tenant-max-bytes, from which
// APPROVALS sources them: the flood is refused at the tenant's own bound,
// and another tenant's send is stored and answered.
func TestATenantThatFillsApprovalsLeavesOthersSending(t *testing.T) {
	dav := davtest.Start(t, davtest.Radicale, davtest.Options{})
	const approvalsBytes, tenantBytes = 4 << 20, 1 << 20
	p := startAuthPipelineProvisioned(t, []string{"--max-bytes", strconv.Itoa(approvalsBytes),
		"--tenants", strings.Join(tenants, ","), "--tenant-max-bytes", strconv.Itoa(tenantBytes)},
		"--task-service", "caldav", "--caldav-url", dav.CollectionURL)
	seed := testenv.SeedFor(t, scenario.CalDAV)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Tenant A: envelopes of the largest valid size, each on a key of its
	// own, then of half the size each time one is refused, down to 1 KiB:
	// a full stream leaves no room for another tenant's approval.
	ajs, _ := jetstream.New(connectAs(t, p.url, "tenant-a", p.pw["tenant-a"]).Conn)
	var refused error
	stored, size := 0, topology.MaxEnvelopeBytes
	for i := 0; size >= 1<<10 && i < 4*approvalsBytes/(1<<10); i++ {
		m := nats.NewMsg("approvals.tenant-a.flood-" + strconv.Itoa(i))
		m.Data = []byte(strings.Repeat("x", size))
		_, err := ajs.PublishMsg(ctx, m)
		switch {
		case err == nil:
			stored += size
		case refused == nil:
			refused = err
			fallthrough
		default:
			size /= 2
		}
	}
	if refused == nil {
		t.Fatalf("tenant-a stored %d bytes and was never refused", stored)
	}
	if stored > tenantBytes {
		t.Errorf("tenant-a stored %d bytes before it was refused (%v), want at most %d: its bound", stored, refused, tenantBytes)
	}

	// Tenant B sends a valid approval of its own scope and gets its receipt.
	approved, err := seed.InScope(seed.Original, "tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	e, err := send.ParseEnvelope(approved.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	bjs, _ := jetstream.New(connectAs(t, p.url, "tenant-b", p.pw["tenant-b"]).Conn)
	sent, rc, err := send.NewClient(bjs).Send(ctx, e)
	if err != nil || rc.Outcome != send.Created {
		t.Fatalf("tenant-b's send after tenant-a's flood: %+v, %+v, %v; want its approval created", sent, rc, err)
	}

	// Tenant A's own send of a valid approval, through the SDK, is refused
	// naming its bound.
	mine, err := seed.InScope(seed.NewIntent, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	ea, _ := send.ParseEnvelope(mine.Envelope())
	_, err = send.NewClient(ajs).Publish(ctx, ea)
	if !errors.Is(err, send.ErrNotPublished) || !strings.Contains(err.Error(), "--tenant-max-bytes") {
		t.Errorf("tenant-a's send past its bound: %v; want refused naming --tenant-max-bytes", err)
	}
	p.statusAndVerify(t)
}

// sourcedSeq is the APPROVALS sequence of the copy of the message an
// intake stream acknowledged with ack on subject, read as a tenant may read
// it: a direct get of the last approval on subject, once its
// Nats-Stream-Source header names the intake's message.
func sourcedSeq(ctx context.Context, t *testing.T, nc *nats.Conn, subject string, ack *jetstream.PubAck) uint64 {
	t.Helper()
	for ctx.Err() == nil {
		m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+topology.ApprovalsStream+"."+subject, nil)
		if err != nil {
			t.Fatalf("reading the last approval on %s: %v", subject, err)
		}
		stream, seq, ok := topology.SourcedFrom(m.Header.Get(topology.HeaderStreamSource))
		if ok && stream == ack.Stream && seq == strconv.FormatUint(ack.Sequence, 10) {
			n, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the message %s stored as %d never reached %s", ack.Stream, ack.Sequence, topology.ApprovalsStream)
	return 0
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
