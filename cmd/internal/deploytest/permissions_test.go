package deploytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

var roles = []string{"provisioning", "publisher", "executor", "service", "operator"}

// tenants are deploy/auth's example tenants: publishers confined to the
// caller scope of their name.
var tenants = []string{"tenant-a", "tenant-b"}

// passwordVar is the environment variable deploy/auth reads a user's
// password from.
func passwordVar(user string) string {
	return "SENDTWICE_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// Key-value buckets deploy/auth names besides the lease: the provisioned
// topology (account SENDTWICE, written by provisioning) and the store the
// task service adopted (account SERVICE).
const (
	topologyBucket = "sendtwice-topology"
	storeBucket    = "fake-task-provider-store"
)

// authServer starts a server from deploy/auth/nats-auth.conf with random
// passwords, on a random port and a test directory.
func authServer(t *testing.T) (url string, passwords map[string]string) {
	t.Helper()
	passwords = map[string]string{}
	for _, r := range append(slices.Clone(roles), tenants...) {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		passwords[r] = hex.EncodeToString(b)
		t.Setenv(passwordVar(r), passwords[r])
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "..", "deploy", "auth", "nats-auth.conf"))
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
	role string
	mu   sync.Mutex
	errs []string
}

// connectAs connects as a role, as its commands do: the user and password,
// and no inbox prefix (each role's account has an _INBOX of its own).
func connectAs(t *testing.T, url, role, password string) *conn {
	t.Helper()
	c := &conn{role: role}
	nc, err := nats.Connect(url, nats.UserInfo(role, password), nats.Name(role),
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

// mark returns how many asynchronous errors c has seen so far.
func (c *conn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs)
}

// violation reports whether a permission violation containing what arrived
// after the first since errors.
func (c *conn) violation(since int, what string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs[since:] {
		if strings.Contains(e, "Permissions Violation") && strings.Contains(e, what) {
			return true
		}
	}
	return false
}

// awaitViolation waits for a permission violation containing what, after
// the first since errors.
func (c *conn) awaitViolation(since int, what string) bool {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if c.violation(since, what) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// refused waits for a permission violation naming subject.
func (c *conn) refused(t *testing.T, what, subject string) {
	t.Helper()
	if !c.awaitViolation(0, `"`+subject+`"`) {
		t.Fatalf("%s: no permission violation for %s (errors seen: %v)", what, subject, c.errs)
	}
}

// canSubscribe subscribes to subject and reports whether the server let it:
// no permission violation naming it within a short wait.
func (c *conn) canSubscribe(t *testing.T, subject string) bool {
	t.Helper()
	since := c.mark()
	sub, err := c.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("subscribing to %s: %v", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = c.Flush()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if c.violation(since, `Subscription to "`+subject+`"`) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// answer is what came of one request: a permission violation naming its
// subject, or the message answered on the requester's inbox (nil: none
// within the wait).
type answer struct {
	refused bool
	msg     *nats.Msg
}

// try sends m with a reply subject of c's own and waits for the answer or a
// permission violation naming m's subject.
func (c *conn) try(t *testing.T, m *nats.Msg) answer {
	t.Helper()
	since := c.mark()
	inbox := c.NewInbox()
	sub, err := c.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := &nats.Msg{Subject: m.Subject, Reply: inbox, Header: m.Header, Data: m.Data}
	if err := c.PublishMsg(req); err != nil {
		t.Fatalf("%s publishing on %s: %v", c.role, m.Subject, err)
	}
	_ = c.Flush()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if msg, err := sub.NextMsg(10 * time.Millisecond); err == nil {
			return answer{msg: msg}
		}
		if c.violation(since, `Publish to "`+m.Subject+`"`) {
			return answer{refused: true}
		}
	}
	return answer{}
}

// seen says what the answer was, in the words of the spy table; a
// JetStream API error is "refused by the server" with its description.
func (a answer) seen() string {
	switch {
	case a.refused:
		return seenRefused
	case a.msg == nil:
		return "no answer"
	case a.msg.Header.Get("Status") == "503":
		return seenNoResponders
	}
	if e := apiError(a.msg); e != "" {
		return "refused by the server: " + e
	}
	return seenAllowed
}

// apiError returns the description of a JetStream API error answer, or "".
func apiError(m *nats.Msg) string {
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(m.Data, &r) == nil && r.Error != nil {
		return r.Error.Description
	}
	return ""
}

func msg(subject, body string) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
}

// watchReceipts waits for receipts as a publisher under deploy/auth does,
// with its own code (send.Listener): a subscription on the key's
// receipts subject, taken before publishing, and a direct get of the last
// receipt stored on it. A publisher may create no consumer.
func watchReceipts(t *testing.T, js jetstream.JetStream, scope, intentID string) *receiptWatch {
	t.Helper()
	w := &receiptWatch{r: testenv.NewListener(js), scope: scope, intent: intentID}
	t.Cleanup(w.r.Close)
	if err := w.r.WatchKey(scope, intentID); err != nil {
		t.Fatal(err)
	}
	return w
}

type receiptWatch struct {
	r             testenv.Listener
	scope, intent string
}

// await returns the first terminal receipt for the approval at streamSeq.
func (w *receiptWatch) await(ctx context.Context, streamSeq uint64) (*testenv.Receipt, error) {
	return w.r.Wait(ctx, w.scope, w.intent, streamSeq)
}

func TestEachRoleDoesItsJobAndNothingElse(t *testing.T) {
	url, pw := authServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))

	var spies spyTables
	jobs := spies.table("What each role did",
		"Each role's own job, run by its own code (allowed), and what lies outside it (refused). "+
			"The clients of one role share its account and can read each other's replies.",
		"role", "action", "subjects", "seen")
	job := func(role, action, subjects, seen string) { spies.add(jobs, role, action, subjects, seen) }

	// Provisioning creates the streams, the consumer and the topology record.
	prov := connectAs(t, url, "provisioning", pw["provisioning"])
	pjs, _ := jetstream.New(prov.Conn)
	if _, err := topology.SetUp(ctx, pjs, topology.Config{AckWait: 2 * time.Second, MaxDeliver: 4, Tenants: tenants},
		topology.SetUpOptions{Logger: log}); err != nil {
		t.Fatalf("provisioning could not create the topology: %v", err)
	}
	topoKV, err := pjs.KeyValue(ctx, topologyBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		topoKV, err = pjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: topologyBucket})
	}
	if err != nil {
		t.Fatalf("provisioning could not open the topology bucket: %v", err)
	}
	if _, err := topoKV.Put(ctx, "deploytest", []byte(`{"written_by":"provisioning"}`)); err != nil {
		t.Fatalf("provisioning could not write the topology record: %v", err)
	}
	// And the executors' intent ledger, as executor provision does.
	if err := ledger.Ensure(ctx, pjs, 1); err != nil {
		t.Fatalf("provisioning could not create the intent ledger: %v", err)
	}
	// And the record of redrives.
	if err := redrive.Ensure(ctx, pjs, 1); err != nil {
		t.Fatalf("provisioning could not create the record of redrives: %v", err)
	}
	job("provisioning", "create and update the streams and the executors' consumer (`executor provision`)",
		"`$JS.API.STREAM.CREATE.*`, `$JS.API.CONSUMER.CREATE.APPROVALS.executor`", seenAllowed)
	job("provisioning", "write the provisioned topology", "`$KV.sendtwice-topology.>`", seenAllowed)

	// The service answers its endpoints, hosted as the provider command
	// hosts it, and holds its lease in its own account.
	svcConn := connectAs(t, url, "service", pw["service"])
	hosted, err := provider.Host(t.TempDir(), provider.Options{Logger: log}, provider.ServiceConfig{Logger: log},
		func() (*nats.Conn, error) { return svcConn.Conn, nil })
	if err != nil {
		t.Fatalf("the service could not serve: %v", err)
	}
	defer func() { _ = hosted.Stop() }()
	// Serving adopted the store: the record is in the service's own bucket.
	sjs, _ := jetstream.New(svcConn.Conn)
	storeKV, err := sjs.KeyValue(ctx, storeBucket)
	if err != nil {
		t.Fatalf("the service could not open its store bucket: %v", err)
	}
	adopted, err := storeKV.Get(ctx, "adopted")
	if err != nil || !strings.Contains(string(adopted.Value()), hosted.Store.ID()) {
		t.Fatalf("the service did not record its store %s as adopted: %v", hosted.Store.ID(), err)
	}
	job("service", "serve `fake-task-provider` (micro), ping other instances, answer requests",
		"subscribe `fake-task-provider.>`, `$SRV.>`; `$SRV.PING.fake-task-provider`", seenAllowed)
	job("service", "hold its lease; keep its store record (JetStream of its own account)",
		"`$KV.fake-task-provider-lease.lease`, `$KV.fake-task-provider-store.adopted`", seenAllowed)

	// The executor pulls its consumer (without provisioning), calls the
	// service, stores receipts and acks; signed approvals only.
	key := scenario.TestKey()
	// The reviewer approves for the default scope and the example tenants'.
	approver := sign.ApproverFor(scenario.Reviewer, key.Public())
	approver.Scopes = append([]string{document.DefaultScope}, tenants...)
	kr, err := sign.NewKeyring(approver)
	if err != nil {
		t.Fatal(err)
	}
	exConn := connectAs(t, url, "executor", pw["executor"])
	exJS, _ := jetstream.New(exConn.Conn)
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
	defer func() { _ = stopEx() }()

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
		w := watchReceipts(t, js, "", document.Identify(s.Original.Envelope()).IntentID)
		sent, err := testenv.Publish(ctx, js, s.Original.Envelope())
		if err != nil {
			t.Fatalf("the publisher could not publish: %v", err)
		}
		rc, err := w.await(ctx, sent.StreamSeq)
		if err != nil {
			t.Fatalf("the publisher could not read its receipt: %v", err)
		}
		if rc.Outcome != want {
			t.Fatalf("send %d: %s, want %s", i+1, rc.Outcome, want)
		}
		receipts = append(receipts, rc.Raw)
	}
	job("publisher", "publish an approval, wait for its receipt (subscribe before publishing, then read stored receipts)",
		"`approvals.<scope>.<intent>` and its ack; subscribe `receipts.<scope>.<intent>`; `$JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>`", seenAllowed)
	job("executor", "pull and ack consumer `executor`, call `create`, store receipts (atomic batches)",
		"`$JS.API.CONSUMER.MSG.NEXT.APPROVALS.executor`, `$JS.ACK.APPROVALS.executor.>`, `fake-task-provider.create`, `receipts.>`", seenAllowed)

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
		if _, err := audit.Consumer(ctx, ojs); err != nil {
			t.Fatalf("the operator could not read the consumer's state: %v", err)
		}
		job("operator", "`executor verify` and `status`: read the three streams through consumers of its own (ephemeral, removed after a minute unused), the consumer's state, the service's counters and records",
			"`$JS.API.CONSUMER.CREATE.<stream>.<own name>[.<filter>]`, `$JS.API.CONSUMER.INFO.*.*`, `fake-task-provider.stats`, `.records`", seenAllowed)
		dead := nats.NewMsg(subjects.DeadLetter("", "intent-0001"))
		dead.Data = s.Original.Envelope()
		dead.Header.Set(topology.HeaderReason, "task service call failed")
		dead.Header.Set(topology.HeaderStreamSeq, "1")
		dead.Header.Set(topology.HeaderDelivered, "4")
		if _, err := exJS.PublishMsg(ctx, dead); err != nil {
			t.Fatalf("the executor could not store a dead letter: %v", err)
		}
		job("executor", "store a dead letter", "`deadletters.<scope>.<intent>` and its ack", seenAllowed)
		dls, err := redrive.List(ctx, ojs)
		if err != nil || len(dls) != 1 {
			t.Fatalf("the operator listed dead letters %v: %v", dls, err)
		}
		recs, err := redrive.OpenRecords(ctx, ojs, true)
		if err != nil {
			t.Fatalf("the operator could not open the record of redrives: %v", err)
		}
		if _, err := recs.RedrivenAs(ctx, dls[0]); err != nil {
			t.Fatalf("the operator could not look for earlier redrives: %v", err)
		}
		sent, err := redrive.Redrive(ctx, ojs, recs, dls[0])
		if err != nil {
			t.Fatalf("the operator could not redrive: %v", err)
		}
		rc, err := testenv.WaitReceipt(ctx, ojs, sent.Scope, sent.IntentID, sent.StreamSeq)
		if err != nil || rc.Outcome != document.OutcomeReplayed {
			t.Fatalf("the redriven approval: %+v, %v; want replayed", rc, err)
		}
		job("operator", "`executor redrive`: read dead letters, republish one as an approval, record it, wait for its receipt",
			"`$JS.API.STREAM.MSG.GET.DEADLETTERS`, `approvals.<scope>.<intent>` and its ack; `$KV.sendtwice-redrives.<dead letter>`; `$JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>`", seenAllowed)
	})

	t.Run("only the operator records which dead letters were redriven", func(t *testing.T) {
		testRedriveRecord(t, ctx, &spies, pjs, op, []*conn{pub, connectAs(t, url, "tenant-a", pw["tenant-a"]),
			connectAs(t, url, "tenant-b", pw["tenant-b"]), exConn, svcConn})
	})

	t.Run("the executor and the operator read the provisioned topology", func(t *testing.T) {
		for _, c := range []*conn{exConn, op} {
			cjs, _ := jetstream.New(c.Conn)
			kv, err := cjs.KeyValue(ctx, topologyBucket)
			if err != nil {
				t.Fatalf("the %s could not open the topology bucket: %v", c.role, err)
			}
			if e, err := kv.Get(ctx, "deploytest"); err != nil || !strings.Contains(string(e.Value()), "provisioning") {
				t.Fatalf("the %s could not read the topology record: %v", c.role, err)
			}
			job(c.role, "read the provisioned topology", "`$JS.API.STREAM.INFO.KV_sendtwice-topology`, `$JS.API.DIRECT.GET.KV_sendtwice-topology.>`", seenAllowed)
		}
		// Only provisioning writes it.
		for _, c := range []*conn{pub, exConn, op, svcConn} {
			a := c.try(t, msg("$KV."+topologyBucket+".deploytest", `{"written_by":"`+c.role+`"}`))
			if !a.refused {
				t.Errorf("the %s writing the topology record: %s, want refused", c.role, a.seen())
			}
			job(c.role, "write the provisioned topology", "`$KV.sendtwice-topology.deploytest`", a.seen())
		}
		if e, err := topoKV.Get(ctx, "deploytest"); err != nil || !strings.Contains(string(e.Value()), "provisioning") {
			t.Fatalf("the topology record changed: %v", err)
		}
	})

	t.Run("only the executors write the intent ledger, only they and the operator read it, and the executors cannot remove it", func(t *testing.T) {
		testIntentLedger(t, ctx, &spies, pjs, exConn, []*conn{pub, connectAs(t, url, "tenant-a", pw["tenant-a"]),
			connectAs(t, url, "tenant-b", pw["tenant-b"]), op, svcConn})
	})

	t.Run("the executor reads a stored receipt back by its intent's subject, as before dead-lettering", func(t *testing.T) {
		// As the executor reads it: MSG.GET with the subject in the body
		// (its role reads every scope's receipts).
		a := exConn.try(t, msg("$JS.API.STREAM.MSG.GET."+topology.ReceiptsStream,
			`{"seq":1,"next_by_subj":"`+subjects.Receipt("", "intent-0001")+`"}`))
		var got struct {
			Message *struct {
				Subject string `json:"subject"`
				Header  []byte `json:"hdrs"`
			} `json:"message"`
		}
		if a.msg == nil || json.Unmarshal(a.msg.Data, &got) != nil || got.Message == nil ||
			got.Message.Subject != subjects.Receipt("", "intent-0001") || !bytes.Contains(got.Message.Header, []byte(topology.HeaderStreamSeq)) {
			t.Fatalf("the executor could not read a stored receipt: %s", a.seen())
		}
		job("executor", "read a stored receipt back before dead-lettering", "`$JS.API.STREAM.INFO.RECEIPTS`, `$JS.API.STREAM.MSG.GET.RECEIPTS`", seenAllowed)
	})

	t.Run("an envelope on another intent's subject is rejected at envelope without a call", func(t *testing.T) {
		before := hosted.Store.Stats()
		w := watchReceipts(t, js, "", "intent-0001")
		m := nats.NewMsg(subjects.Approval("", "intent-0002"))
		m.Data = s.Original.Envelope()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publishing: %v", err)
		}
		rc, err := w.await(ctx, ack.Sequence)
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

	t.Run("each role calls only its own endpoints of the task service", func(t *testing.T) {
		for _, c := range []*conn{pub, exConn, op, prov} {
			for _, subject := range []string{provider.SubjectCreate, provider.SubjectStats, provider.SubjectRecords} {
				a := c.try(t, msg(subject, `{"kind":"tasks"}`))
				want := (c.role == "executor" && subject == provider.SubjectCreate) ||
					(c.role == "operator" && subject != provider.SubjectCreate)
				if got := !a.refused && a.msg != nil && a.msg.Header.Get("Status") != "503"; got != want {
					t.Errorf("the %s on %s: %s; want answered %v", c.role, subject, a.seen(), want)
				}
				if !want {
					job(c.role, "call the task service", "`"+subject+"`", a.seen())
				}
			}
		}
	})

	t.Run("the streams refuse a message larger than the gate accepts", func(t *testing.T) {
		big := nats.NewMsg(subjects.Approval("", "intent-big"))
		big.Data = bytes.Repeat([]byte(" "), document.Limits.MaxBytes+topology.HeaderAllowance+1)
		if _, err := js.PublishMsg(ctx, big); err == nil {
			t.Fatal("APPROVALS stored a message larger than the gate accepts")
		} else if !strings.Contains(err.Error(), "maximum") {
			t.Fatalf("publishing an oversized approval: %v, want the stream's size refusal", err)
		}
		for _, subject := range []string{subjects.Receipt("", "intent-big"), subjects.DeadLetter("", "intent-big")} {
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
	deadBefore := streamMsgs(t, pjs, topology.DeadLetterStream)

	t.Run("each role publishes only onto its own streams", func(t *testing.T) {
		for _, c := range []*conn{pub, exConn, op, svcConn} {
			approval := subjects.Approval("", "intent-0001")
			for _, subject := range []string{approval, subjects.Receipt("", "intent-0001"), subjects.DeadLetter("", "intent-0001")} {
				may := map[string]bool{"publisher": subject == approval, "operator": subject == approval,
					"executor": subject != approval}[c.role]
				if may {
					continue // shown by the role's job above
				}
				since := c.mark()
				_ = c.Publish(subject, []byte(`{}`))
				_ = c.Flush()
				refused := c.awaitViolation(since, `"`+subject+`"`)
				if !refused {
					t.Errorf("the %s publishing on %s was not refused", c.role, subject)
				}
				seen := seenRefused
				if !refused {
					seen = "not refused"
				}
				job(c.role, "publish onto a stream", "`"+subject+"`", seen)
			}
		}
	})
	t.Run("the service cannot read approvals", func(t *testing.T) {
		if _, err := svcConn.SubscribeSync("approvals.>"); err == nil {
			_ = svcConn.Flush()
		}
		svcConn.refused(t, "service subscribing to approvals", "approvals.>")
		a := svcConn.try(t, msg("$JS.API.STREAM.MSG.GET.APPROVALS", `{"seq":1}`))
		if !a.refused {
			t.Fatalf("the service reading the APPROVALS stream: %s", a.seen())
		}
		job("service", "read a stored approval", "`$JS.API.STREAM.MSG.GET.APPROVALS`", a.seen())
	})
	t.Run("the service holds the lease and can touch no other stream or key", func(t *testing.T) {
		kv, err := sjs.KeyValue(ctx, provider.LeaseBucket)
		if err != nil {
			t.Fatalf("the lease bucket: %v", err)
		}
		if e, err := kv.Get(ctx, provider.LeaseKey); err != nil || !strings.Contains(string(e.Value()), hosted.Store.ID()) {
			t.Fatalf("the lease: %v; want it held by %s", err, hosted.Store.ID())
		}
		for _, try := range []struct{ action, subject, body string }{
			{"write another key of its lease bucket", "$KV." + provider.LeaseBucket + ".other", `x`},
			{"delete its lease bucket", "$JS.API.STREAM.DELETE.KV_" + provider.LeaseBucket, ""},
			{"create another stream", "$JS.API.STREAM.CREATE.OTHER", `{"name":"OTHER"}`},
		} {
			a := svcConn.try(t, msg(try.subject, try.body))
			if !a.refused {
				t.Errorf("the service on %s: %s, want refused", try.subject, a.seen())
			}
			job("service", try.action, "`"+try.subject+"`", a.seen())
		}
		// The lease and the store record live in the service's account:
		// provisioning's JetStream does not have them.
		for _, bucket := range []string{provider.LeaseBucket, storeBucket} {
			_, err := pjs.KeyValue(ctx, bucket)
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				t.Errorf("provisioning opening %s: %v, want not found", bucket, err)
			}
			job("provisioning", "open the service's bucket "+bucket, "`$JS.API.STREAM.INFO.KV_"+bucket+"`", "not found (another account)")
		}
		for _, c := range []*conn{pub, exConn, op} {
			for _, bucket := range []string{provider.LeaseBucket, storeBucket} {
				a := c.try(t, msg("$JS.API.STREAM.INFO.KV_"+bucket, ""))
				if !a.refused {
					t.Errorf("the %s opening the service's bucket %s: %s, want refused", c.role, bucket, a.seen())
				}
				job(c.role, "open the service's bucket "+bucket, "`$JS.API.STREAM.INFO.KV_"+bucket+"`", a.seen())
			}
		}
	})
	t.Run("the refused publishes stored nothing", func(t *testing.T) {
		for name, before := range map[string]uint64{topology.ApprovalsStream: approvalsBefore, topology.ReceiptsStream: receiptsBefore,
			topology.DeadLetterStream: deadBefore} {
			if got := streamMsgs(t, pjs, name); got != before {
				t.Errorf("%s holds %d messages, had %d", name, got, before)
			}
		}
	})

	t.Run("a publisher can aim a stored receipt at another publisher's receipt subscription, and that one's wait does not take it", func(t *testing.T) {
		// Both publishers share their account: the answer to one's direct
		// get can be delivered on a subject the other subscribed to. What
		// arrives is a receipt the sender may read anyway, of its own key's
		// message; a waiting publisher reports only a stored receipt of its
		// own message, never one it was only sent.
		other := connectAs(t, url, "publisher", pw["publisher"])
		ojs, _ := jetstream.New(other.Conn)
		w := watchReceipts(t, ojs, "", "intent-0009")
		m := msg("$JS.API.DIRECT.GET.RECEIPTS."+subjects.Receipt("", "intent-0001"), "")
		m.Reply = subjects.Receipt("", "intent-0009")
		spy, err := other.SubscribeSync(m.Reply)
		if err != nil {
			t.Fatal(err)
		}
		_ = other.Flush()
		if err := pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		got, err := spy.NextMsg(3 * time.Second)
		if err != nil {
			t.Fatalf("the answer did not arrive on the other publisher's subscription: %v", err)
		}
		seq, err := strconv.ParseUint(got.Header.Get(topology.HeaderStreamSeq), 10, 64)
		if err != nil {
			t.Fatalf("the answer is not a stored receipt: %v %s", got.Header, got.Data)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if rc, err := w.await(wctx, seq); !errors.Is(err, send.ErrNoReceipt) {
			t.Fatalf("the other publisher's wait for message %d on intent-0009 took the receipt sent to it: %+v, %v", seq, rc, err)
		}
		job("publisher", "name another publisher's `receipts.<scope>.<intent>` as the reply of its own direct get",
			"`$JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>`, reply `receipts.<scope>.<other intent>`",
			"delivered to that publisher: a receipt the sender may read, which that publisher's wait does not take (not stored on its key)")
	})

	t.Run("a tenant sends and reads only within its own scope", func(t *testing.T) {
		testTenants(t, ctx, &spies, url, pw, s, hosted.Store.Stats)
	})

	t.Run("each role subscribes only where its job needs and reads no other role's replies", func(t *testing.T) {
		subs := spies.table("Subscriptions", "", "role", "subject", "seen")
		conns := map[string]*conn{}
		for _, role := range roles {
			conns[role] = connectAs(t, url, role, pw[role])
		}
		for _, role := range roles {
			spy := conns[role]
			for _, subject := range []string{"_INBOX.>", ">", "approvals.>", "receipts.>", "deadletters.>", "fake-task-provider.>", "$SRV.>"} {
				want := subject == "_INBOX.>" ||
					(subject == "receipts.>" && (role == "publisher" || role == "operator")) ||
					(role == "service" && (subject == "fake-task-provider.>" || subject == "$SRV.>"))
				could := spy.canSubscribe(t, subject)
				if could != want {
					t.Errorf("a %s connection subscribing to %s: allowed %v, want %v", role, subject, could, want)
				}
				seen := seenRefused
				if could {
					seen = seenAllowed
				}
				spies.add(subs, role, "`"+subject+"`", seen)
			}
		}
		// Every role's spy listens on _INBOX.>; each role then makes a
		// request and reads its answer on an inbox of its own. A spy must
		// see the answers of its own role's clients only.
		spyOf := map[string]*nats.Subscription{}
		for _, role := range roles {
			sub, err := conns[role].SubscribeSync("_INBOX.>")
			if err != nil {
				t.Fatal(err)
			}
			_ = conns[role].Flush()
			spyOf[role] = sub
		}
		requestOf := map[string]*nats.Msg{
			"provisioning": msg("$JS.API.INFO", ""),
			"publisher":    msg("$JS.API.STREAM.INFO.RECEIPTS", ""),
			"executor":     msg("$JS.API.CONSUMER.INFO.APPROVALS.executor", ""),
			"operator":     msg(provider.SubjectStats, ""),
			"service":      msg("$JS.API.INFO", ""),
		}
		inboxes := map[string]string{} // inbox subject → role
		ask := func(role string) string {
			actor := connectAs(t, url, role, pw[role])
			a := actor.try(t, requestOf[role])
			if a.msg == nil || a.seen() != seenAllowed {
				t.Fatalf("the %s's request on %s: %s", role, requestOf[role].Subject, a.seen())
			}
			inboxes[a.msg.Subject] = role
			return a.msg.Subject
		}
		for _, role := range roles {
			ask(role)
		}
		last := map[string]string{}
		for _, role := range roles {
			last[role] = ask(role) // after every other role's
		}
		for _, role := range roles {
			var saw []string
			for {
				m, err := spyOf[role].NextMsg(3 * time.Second)
				if err != nil {
					t.Fatalf("the %s's spy never saw its own role's answer: %v", role, err)
				}
				if from, ok := inboxes[m.Subject]; ok && from != role {
					t.Errorf("the %s's spy read an answer sent to the %s", role, from)
					saw = append(saw, from)
				}
				if m.Subject == last[role] {
					break
				}
			}
			seen := "its own role's answers only"
			if len(saw) > 0 {
				seen = "also the answers of " + strings.Join(saw, ", ")
			}
			spies.add(subs, role, "`_INBOX.>` while every role makes requests", seen)
		}
	})

	t.Run("nobody but provisioning creates, changes, pauses, resets or deletes the executors' consumer", func(t *testing.T) {
		testConsumerRewrites(t, ctx, &spies, pjs, map[string]*conn{"publisher": pub, "executor": exConn, "service": svcConn, "operator": op})
	})
	t.Run("the publisher creates no consumer of any kind, and neither do the executor and the service", func(t *testing.T) {
		testNoConsumers(t, ctx, &spies, pjs, pub, exConn, svcConn)
	})
	t.Run("no role writes into a stream it may not publish to, reply subjects included", func(t *testing.T) {
		testReplyInjection(t, ctx, &spies, pjs, sjs, map[string]*conn{"provisioning": prov, "publisher": pub, "executor": exConn,
			"service": svcConn, "operator": op, "tenant-a": connectAs(t, url, "tenant-a", pw["tenant-a"])})
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

	if !t.Failed() && !partialRun() {
		spies.compare(t)
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	return testenv.StreamState(t, js, name).Msgs
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
