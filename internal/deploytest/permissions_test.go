package deploytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/publish"
	"github.com/sendtwice/sendtwice/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

var roles = []string{"provisioning", "publisher", "executor", "service", "operator"}

// authServer starts a server from deploy/auth/nats-auth.conf with random
// passwords, on a random port and a test directory.
func authServer(t *testing.T) (url string, passwords map[string]string) {
	t.Helper()
	passwords = map[string]string{}
	for _, r := range roles {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		passwords[r] = hex.EncodeToString(b)
		t.Setenv("SENDTWICE_"+strings.ToUpper(r)+"_PASSWORD", passwords[r])
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "deploy", "auth", "nats-auth.conf"))
	if err != nil {
		t.Fatalf("reading deploy/auth/nats-auth.conf: %v", err)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir = t.TempDir()
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	if !opts.JetStream || !s.JetStreamEnabled() {
		t.Fatal("the deploy configuration does not enable JetStream")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL(), passwords
}

// conn connects as a role and collects asynchronous errors such as
// permission violations.
type conn struct {
	*nats.Conn
	mu   sync.Mutex
	errs []string
}

// inboxPrefix is the inbox prefix deploy/auth gives a role; its clients
// connect with --inbox-prefix set to it.
func inboxPrefix(role string) string { return "_INBOX_" + role }

func connectAs(t *testing.T, url, role, password string) *conn {
	t.Helper()
	c := &conn{}
	nc, err := nats.Connect(url, nats.UserInfo(role, password), nats.Name(role), nats.CustomInboxPrefix(inboxPrefix(role)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("connecting as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	return c
}

// refused waits for a permission violation naming subject.
func (c *conn) refused(t *testing.T, what, subject string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, e := range c.errs {
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, subject) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no permission violation for %s (errors seen: %v)", what, subject, c.errs)
}

// canSubscribe subscribes to subject and reports whether the server let it:
// no permission violation naming it within a short wait.
func (c *conn) canSubscribe(t *testing.T, subject string) bool {
	t.Helper()
	sub, err := c.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("subscribing to %s: %v", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = c.Flush()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, e := range c.errs {
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, `"`+subject+`"`) {
				c.mu.Unlock()
				return false
			}
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// reach records, per role, what a spy of that role could and could not
// read or do, for the table the test prints.
type reach struct {
	mu   sync.Mutex
	rows map[string][2][]string
}

func (r *reach) note(role, what string, could bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rows == nil {
		r.rows = map[string][2][]string{}
	}
	row := r.rows[role]
	if could {
		row[0] = append(row[0], what)
	} else {
		row[1] = append(row[1], what)
	}
	r.rows[role] = row
}

func (r *reach) log(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "what each role's spy could and could not do:\n%-13s | %-5s | %s\n", "role", "could", "subject")
	for _, role := range roles {
		for i, label := range []string{"yes", "no"} {
			for _, what := range r.rows[role][i] {
				fmt.Fprintf(&b, "%-13s | %-5s | %s\n", role, label, what)
			}
		}
	}
	t.Log(b.String())
}

func TestEachRoleDoesItsJobAndNothingElse(t *testing.T) {
	url, pw := authServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))

	// Provisioning creates the streams and the consumer.
	prov := connectAs(t, url, "provisioning", pw["provisioning"])
	pjs, _ := jetstream.New(prov.Conn)
	if _, err := topology.SetUp(ctx, pjs, topology.Config{AckWait: 2 * time.Second, MaxDeliver: 4}, topology.SetUpOptions{Logger: log}); err != nil {
		t.Fatalf("provisioning could not create the topology: %v", err)
	}

	// The service answers its endpoints, hosted as the provider command
	// hosts it.
	svcConn := connectAs(t, url, "service", pw["service"])
	hosted, err := provider.Host(t.TempDir(), provider.Options{Logger: log}, provider.ServiceConfig{Logger: log},
		func() (*nats.Conn, error) { return svcConn.Conn, nil })
	if err != nil {
		t.Fatalf("the service could not serve: %v", err)
	}
	defer func() { _ = hosted.Stop() }()

	// The executor pulls its consumer (without provisioning), calls the
	// service, stores receipts and acks; signed approvals only.
	key := scenario.TestKey()
	kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	exConn := connectAs(t, url, "executor", pw["executor"])
	ex, err := executor.New(exConn.Conn, executor.Config{ID: "exec-1", NoProvision: true, Logger: log,
		TaskService: provider.NewClient(exConn.Conn).TaskService(),
		Gate:        &gate.Checker{Keys: kr}, Topology: topology.Config{AckWait: 2 * time.Second, MaxDeliver: 4}})
	if err != nil {
		t.Fatal(err)
	}
	stopEx, err := ex.Start(context.Background())
	if err != nil {
		t.Fatalf("the executor could not start under its permissions: %v", err)
	}
	defer stopEx()

	// The publisher sends an approval twice and reads its receipts.
	pub := connectAs(t, url, "publisher", pw["publisher"])
	js, _ := jetstream.New(pub.Conn)
	now := time.Now().UTC().Truncate(time.Second)
	s, err := scenario.BuildSigned(key, now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var receipts [][]byte
	for i, want := range []string{document.OutcomeCreated, document.OutcomeReplayed} {
		sent, err := publish.Send(ctx, js, s.Original.Envelope())
		if err != nil {
			t.Fatalf("the publisher could not publish: %v", err)
		}
		rc, err := publish.WaitReceipt(ctx, js, sent.IntentID, sent.StreamSeq)
		if err != nil {
			t.Fatalf("the publisher could not read its receipt: %v", err)
		}
		if rc.Outcome != want {
			t.Fatalf("send %d: %s, want %s", i+1, rc.Outcome, want)
		}
		receipts = append(receipts, rc.Raw)
	}

	// The operator reads everything verify and status read, and redrives a
	// dead letter (stored here by the executor's role, as an executor
	// dead-letters a message) as a new approval.
	op := connectAs(t, url, "operator", pw["operator"])
	ojs, _ := jetstream.New(op.Conn)
	t.Run("the operator runs verify, status and redrive", func(t *testing.T) {
		in, err := audit.Load(ctx, op.Conn)
		if err != nil {
			t.Fatalf("the operator could not read what verify reads: %v", err)
		}
		if in.Counts.RequestsReceived != 2 || len(in.Messages) != 2 {
			t.Fatalf("verify read %d requests and %d messages, want 2 and 2", in.Counts.RequestsReceived, len(in.Messages))
		}
		if _, err := audit.CountReceipts(ctx, ojs); err != nil {
			t.Fatalf("the operator could not count receipts: %v", err)
		}
		exJS, _ := jetstream.New(exConn.Conn)
		dead := nats.NewMsg(topology.DeadLetterSubjectFor("intent-0001"))
		dead.Data = s.Original.Envelope()
		dead.Header.Set(topology.HeaderReason, "task service call failed")
		dead.Header.Set(topology.HeaderStreamSeq, "1")
		dead.Header.Set(topology.HeaderDelivered, "4")
		if _, err := exJS.PublishMsg(ctx, dead); err != nil {
			t.Fatalf("the executor could not store a dead letter: %v", err)
		}
		dls, err := redrive.List(ctx, ojs)
		if err != nil || len(dls) != 1 {
			t.Fatalf("the operator listed dead letters %v: %v", dls, err)
		}
		if _, err := redrive.Redriven(ctx, ojs); err != nil {
			t.Fatalf("the operator could not look for earlier redrives: %v", err)
		}
		sent, err := redrive.Redrive(ctx, ojs, dls[0], false)
		if err != nil {
			t.Fatalf("the operator could not redrive: %v", err)
		}
		rc, err := publish.WaitReceipt(ctx, ojs, sent.IntentID, sent.StreamSeq)
		if err != nil || rc.Outcome != document.OutcomeReplayed {
			t.Fatalf("the redriven approval: %+v, %v; want replayed", rc, err)
		}
	})

	var table reach
	defer table.log(t)

	t.Run("an envelope on another intent's subject is rejected at envelope without a call", func(t *testing.T) {
		before := hosted.Store.Stats()
		m := nats.NewMsg(topology.ApprovalSubject("intent-0002"))
		m.Data = s.Original.Envelope()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publishing: %v", err)
		}
		rc, err := publish.WaitReceipt(ctx, js, "intent-0001", ack.Sequence)
		if err != nil {
			t.Fatalf("no receipt for the misplaced envelope: %v", err)
		}
		if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckEnvelope {
			t.Fatalf("receipt %s, want rejected at %s", rc.Raw, gate.CheckEnvelope)
		}
		if after := hosted.Store.Stats(); after != before {
			t.Fatalf("the task service was called: counts %+v, were %+v", after, before)
		}
	})

	t.Run("each role reads its own inbox and no other", func(t *testing.T) {
		for _, role := range roles {
			spy := connectAs(t, url, role, pw[role])
			subjects := []string{"_INBOX.>", ">"}
			for _, other := range roles {
				subjects = append(subjects, inboxPrefix(other)+".>")
			}
			for _, subject := range subjects {
				could := spy.canSubscribe(t, subject)
				table.note(role, "subscribe "+subject, could)
				if want := subject == inboxPrefix(role)+".>"; could != want {
					t.Errorf("a %s connection subscribing to %s: allowed %v, want %v", role, subject, could, want)
				}
			}
		}
	})

	t.Run("the publisher reads receipts only through a consumer filtered on one intent, and deletes none", func(t *testing.T) {
		spy := connectAs(t, url, "publisher", pw["publisher"])
		body := func(cfg string) []byte {
			return []byte(`{"stream_name":"RECEIPTS","config":` + cfg + `,"action":"create"}`)
		}
		for _, try := range []struct{ subject, cfg string }{
			// A durable consumer through the legacy subject.
			{"$JS.API.CONSUMER.DURABLE.CREATE.RECEIPTS.spy", `{"durable_name":"spy","filter_subject":"receipts.>","ack_policy":"none"}`},
			// No filter in the subject: the body could name any filter.
			{"$JS.API.CONSUMER.CREATE.RECEIPTS.spy", `{"durable_name":"spy","filter_subject":"receipts.>","ack_policy":"none"}`},
			// A filter of more than one intent's subject.
			{"$JS.API.CONSUMER.CREATE.RECEIPTS.spy.receipts.a.b", `{"name":"spy","filter_subject":"receipts.a.b","ack_policy":"none"}`},
			// Consumers on other streams.
			{"$JS.API.CONSUMER.CREATE.APPROVALS.spy.approvals.intent-0001", `{"name":"spy","filter_subject":"approvals.intent-0001","ack_policy":"none"}`},
			{"$JS.API.CONSUMER.CREATE.DEADLETTERS.spy.deadletters.intent-0001", `{"name":"spy","filter_subject":"deadletters.intent-0001","ack_policy":"none"}`},
			// Deleting any consumer.
			{"$JS.API.CONSUMER.DELETE.RECEIPTS.spy", ""},
			{"$JS.API.CONSUMER.DELETE.APPROVALS.executor", ""},
		} {
			if _, err := spy.Request(try.subject, body(try.cfg), 500*time.Millisecond); err == nil {
				t.Errorf("the publisher was answered on %s", try.subject)
			}
			spy.refused(t, "publisher on "+try.subject, try.subject)
			table.note("publisher", try.subject, false)
		}
		table.note("publisher", "$JS.API.CONSUMER.CREATE.RECEIPTS.<name>.receipts.<intent> (send --wait)", true)
		if _, err := pjs.Consumer(ctx, topology.ApprovalsStream, topology.Consumer); err != nil {
			t.Fatalf("the executors' consumer is gone: %v", err)
		}
	})

	t.Run("the executor cannot read the service's records or counters", func(t *testing.T) {
		spy := connectAs(t, url, "executor", pw["executor"])
		for _, subject := range []string{provider.SubjectRecords, provider.SubjectStats} {
			if _, err := spy.Request(subject, []byte(`{"kind":"tasks"}`), 500*time.Millisecond); err == nil {
				t.Errorf("the executor was answered on %s", subject)
			}
			spy.refused(t, "executor on "+subject, subject)
			table.note("executor", subject, false)
		}
		table.note("executor", provider.SubjectCreate, true)
		table.note("operator", provider.SubjectRecords+", "+provider.SubjectStats+" (verify, status)", true)
	})

	t.Run("the streams refuse a message larger than the gate accepts", func(t *testing.T) {
		big := nats.NewMsg(topology.ApprovalSubject("intent-big"))
		big.Data = bytes.Repeat([]byte(" "), document.Limits.MaxBytes+topology.HeaderAllowance+1)
		if _, err := js.PublishMsg(ctx, big); err == nil {
			t.Fatal("APPROVALS stored a message larger than the gate accepts")
		} else if !strings.Contains(err.Error(), "maximum") {
			t.Fatalf("publishing an oversized approval: %v, want the stream's size refusal", err)
		}
		exJS, _ := jetstream.New(exConn.Conn)
		for _, subject := range []string{topology.ReceiptSubject("intent-big"), topology.DeadLetterSubjectFor("intent-big")} {
			m := nats.NewMsg(subject)
			m.Data = bytes.Repeat([]byte(" "), topology.DeadLetterMaxMsg+1)
			if _, err := exJS.PublishMsg(ctx, m); err == nil {
				t.Errorf("%s stored an oversized message", subject)
			}
		}
		for _, name := range []string{topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream} {
			st, err := pjs.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			c := st.CachedInfo().Config
			if c.MaxMsgSize <= 0 || c.MaxBytes <= 0 || c.Discard != jetstream.DiscardNew {
				t.Errorf("stream %s: MaxMsgSize %d, MaxBytes %d, discard %v; want both limits set and DiscardNew", name, c.MaxMsgSize, c.MaxBytes, c.Discard)
			}
		}
	})

	approvalsBefore := streamMsgs(t, pjs, topology.ApprovalsStream)
	receiptsBefore := streamMsgs(t, pjs, topology.ReceiptsStream)

	t.Run("the publisher cannot publish receipts", func(t *testing.T) {
		_ = pub.Publish("receipts.intent-0001", []byte(`{}`))
		_ = pub.Flush()
		pub.refused(t, "publisher publishing a receipt", "receipts.intent-0001")
	})
	t.Run("the publisher cannot pull the executors' consumer", func(t *testing.T) {
		_, err := pub.Request("$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor", []byte(`{"batch":1}`), time.Second)
		if err == nil {
			t.Fatal("the publisher pulled from the executors' consumer")
		}
		pub.refused(t, "publisher pulling the consumer", "$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor")
	})
	t.Run("the executor cannot publish approvals", func(t *testing.T) {
		_ = exConn.Publish("approvals.intent-0001", s.Original.Envelope())
		_ = exConn.Flush()
		exConn.refused(t, "executor publishing an approval", "approvals.intent-0001")
	})
	t.Run("the service cannot read approvals", func(t *testing.T) {
		if _, err := svcConn.SubscribeSync("approvals.>"); err == nil {
			_ = svcConn.Flush()
		}
		svcConn.refused(t, "service subscribing to approvals", "approvals.>")
		if _, err := svcConn.Request("$JS.API.STREAM.MSG.GET.APPROVALS", []byte(`{"seq":1}`), time.Second); err == nil {
			t.Fatal("the service read a message of the APPROVALS stream")
		}
		svcConn.refused(t, "service reading the stream", "$JS.API.STREAM.MSG.GET.APPROVALS")
	})
	t.Run("the service holds the lease and can touch no other stream or key", func(t *testing.T) {
		kv, err := pjs.KeyValue(ctx, provider.LeaseBucket)
		if err != nil {
			t.Fatalf("the lease bucket: %v", err)
		}
		if e, err := kv.Get(ctx, provider.LeaseKey); err != nil || !strings.Contains(string(e.Value()), hosted.Store.ID()) {
			t.Fatalf("the lease: %v; want it held by %s", err, hosted.Store.ID())
		}
		_ = svcConn.Publish("$KV."+provider.LeaseBucket+".other", []byte(`x`))
		_ = svcConn.Flush()
		svcConn.refused(t, "service writing another key", "$KV."+provider.LeaseBucket+".other")
		if _, err := svcConn.Request("$JS.API.STREAM.DELETE.KV_"+provider.LeaseBucket, nil, time.Second); err == nil {
			t.Fatal("the service deleted the lease bucket")
		}
		svcConn.refused(t, "service deleting the lease bucket", "$JS.API.STREAM.DELETE.KV_"+provider.LeaseBucket)
		if _, err := svcConn.Request("$JS.API.STREAM.CREATE.OTHER", []byte(`{"name":"OTHER"}`), time.Second); err == nil {
			t.Fatal("the service created a stream")
		}
		svcConn.refused(t, "service creating a stream", "$JS.API.STREAM.CREATE.OTHER")
	})
	t.Run("the operator cannot pull, change or delete the executors' consumer, nor call create", func(t *testing.T) {
		for _, subject := range []string{
			"$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor",
			"$JS.API.CONSUMER.DELETE.APPROVALS.executor",
			"$JS.API.CONSUMER.CREATE.APPROVALS.executor",
			"$JS.API.CONSUMER.CREATE.APPROVALS.executor.approvals.>",
			provider.SubjectCreate,
		} {
			if _, err := op.Request(subject, []byte(`{}`), 500*time.Millisecond); err == nil {
				t.Fatalf("the operator was answered on %s", subject)
			}
			op.refused(t, "operator on "+subject, subject)
		}
		if _, err := pjs.Consumer(ctx, topology.ApprovalsStream, topology.Consumer); err != nil {
			t.Fatalf("the executors' consumer is gone: %v", err)
		}
	})
	t.Run("the refused publishes stored nothing", func(t *testing.T) {
		if got := streamMsgs(t, pjs, topology.ApprovalsStream); got != approvalsBefore {
			t.Fatalf("APPROVALS holds %d messages, had %d", got, approvalsBefore)
		}
		if got := streamMsgs(t, pjs, topology.ReceiptsStream); got != receiptsBefore {
			t.Fatalf("RECEIPTS holds %d messages, had %d", got, receiptsBefore)
		}
	})

	t.Run("no password or key material appears in logs, receipts or errors", func(t *testing.T) {
		// Errors that involve secrets: a wrong password, a URL with a
		// password, a key file readable by others.
		cfg := &cli.ConnConfig{Server: strings.Replace(url, "nats://", "nats://publisher:"+pw["service"]+"@", 1)}
		_, err1 := cfg.Connect("wrong", nil)
		cfg = &cli.ConnConfig{Server: url, User: "publisher", Password: pw["executor"]}
		_, err2 := cfg.Connect("wrong", nil)
		dir := t.TempDir()
		k, err := sign.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sign.WriteKeyPair(dir, "leaky", k); err != nil {
			t.Fatal(err)
		}
		keyPath := filepath.Join(dir, "leaky.key")
		pem, _ := os.ReadFile(keyPath)
		_ = os.Chmod(keyPath, 0o644)
		_, err3 := sign.LoadKey(keyPath)
		if err1 == nil || err2 == nil || err3 == nil {
			t.Fatalf("expected errors, got %v, %v, %v", err1, err2, err3)
		}
		logMu.Lock()
		haystack := logs.String()
		logMu.Unlock()
		for _, r := range receipts {
			haystack += string(r)
		}
		haystack += err1.Error() + err2.Error() + err3.Error() + k.String() + fmt.Sprintf("%v %#v", k, k)
		secrets := map[string]string{"the private key file": strings.TrimSpace(string(pem))}
		for r, p := range pw {
			secrets[r+"'s password"] = p
		}
		der := keyDER(t, pem)
		secrets["the private key (base64)"] = base64.StdEncoding.EncodeToString(der)
		secrets["the test key's seed (base64url)"] = base64.RawURLEncoding.EncodeToString(der[len(der)-32:])
		for what, secret := range secrets {
			if strings.Contains(haystack, secret) {
				t.Errorf("%s appears in logs, receipts or errors", what)
			}
		}
		if len(haystack) < 200 {
			t.Fatalf("the logs and receipts are nearly empty (%d bytes); the check would prove nothing", len(haystack))
		}
	})
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func keyDER(t *testing.T, pemBytes []byte) []byte {
	t.Helper()
	if i := strings.Index(string(pemBytes), "-----BEGIN"); i > 0 {
		pemBytes = pemBytes[i:] // the reviewer's name line comes first
	}
	lines := strings.Split(strings.TrimSpace(string(pemBytes)), "\n")
	der, err := base64.StdEncoding.DecodeString(strings.Join(lines[1:len(lines)-1], ""))
	if err != nil {
		t.Fatal(errors.New("unreadable PEM"))
	}
	return der
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
