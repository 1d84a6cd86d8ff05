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
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
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
