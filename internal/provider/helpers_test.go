package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// roleEnv makes the test binary play one short-lived provider process
// instead of running tests (see TestMain and runRole).
const roleEnv = "PROVIDER_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintln(os.Stderr, "role", role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runRole is one provider process: it opens the store in PROVIDER_TEST_DATA,
// serves it on PROVIDER_TEST_NATS, makes one call over NATS as a separate
// client connection, prints the reply as JSON on stdout, and shuts down.
func runRole(role string) error {
	url, dir := os.Getenv("PROVIDER_TEST_NATS"), os.Getenv("PROVIDER_TEST_DATA")
	st, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer st.Close()
	snc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer snc.Close()
	ttl, _ := time.ParseDuration(os.Getenv("PROVIDER_TEST_LEASE_TTL"))
	svc, err := Serve(snc, st, ServiceConfig{Logger: quietLogger(), LeaseTTL: ttl, DataDir: dir})
	if err != nil {
		return err
	}
	if role == "serve" {
		// Serve until killed: print who serves, then wait.
		if err := json.NewEncoder(os.Stdout).Encode(LeaseHolder{StoreID: svc.StoreID(), Instance: svc.Instance()}); err != nil {
			return err
		}
		select {}
	}
	defer func() { _ = svc.Stop() }()
	cnc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer cnc.Close()
	client := NewClient(cnc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out any
	switch role {
	case "create":
		out, err = client.Create(ctx, newRequest(os.Getenv("PROVIDER_TEST_INTENT"), os.Getenv("PROVIDER_TEST_CONTENT")))
	case "stats":
		out, err = client.Stats(ctx)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func digestOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newRequest is a create request for a task titled content, with the
// request document its digest is computed over (NewRequest).
func newRequest(intent, content string) CreateRequest {
	req, err := NewRequest(intent, Task{Title: content})
	if err != nil {
		panic(err)
	}
	return req
}

// startNATS runs an embedded NATS server with JetStream (which the service's
// lease needs) for the test and returns its URL.
func startNATS(tb testing.TB) string {
	tb.Helper()
	return startServer(tb, &server.Options{Port: -1, JetStream: true, StoreDir: tb.TempDir()}).ClientURL()
}

// startServer runs an embedded NATS server with o on 127.0.0.1, quiet, for
// the test, and stops it when the test ends.
func startServer(tb testing.TB, o *server.Options) *server.Server {
	tb.Helper()
	o.Host, o.NoLog, o.NoSigs = "127.0.0.1", true, true
	ns, err := server.NewServer(o)
	if err != nil {
		tb.Fatalf("new nats server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

func connect(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func openStore(tb testing.TB, dir string, opts Options) *Store {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	st, err := Open(dir, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return st
}

// harness is a store served on an embedded NATS server, with a client on a
// connection of its own.
type harness struct {
	url    string
	st     *Store
	svc    *Service
	nc     *nats.Conn // the client's connection
	client *Client
}

func newHarness(tb testing.TB, opts Options, cfg ServiceConfig) *harness {
	tb.Helper()
	url := startNATS(tb)
	st := openStore(tb, tb.TempDir(), opts)
	snc := connect(tb, url)
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	svc, err := Serve(snc, st, cfg)
	if err != nil {
		tb.Fatalf("serve: %v", err)
	}
	tb.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			tb.Errorf("stop service: %v", err)
		}
	})
	nc := connect(tb, url)
	return &harness{url: url, st: st, svc: svc, nc: nc, client: NewClient(nc)}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func counts(r, c, t int64) Counts {
	return Counts{RequestsReceived: r, CreatesExecuted: c, TasksExisting: t}
}

// allRecords reads every record of one kind, of one intent id in scope
// default or of all keys (intent ""), following pages of 7.
func allRecords(tb testing.TB, st *Store, kind, intent string) RecordsResponse {
	tb.Helper()
	return scopedRecords(tb, st, kind, keyID{"", intent}, 7)
}

// auditReport is what the audit found, per intent id.
type auditReport struct {
	counts        Counts
	createsPer    map[string]int
	tasksPer      map[string]int
	requestsPer   map[string]int
	intentRecords map[string]FirstResult
}

// audit reads all four records and checks that they agree with each other
// and with the counters: every request is whole (its outcome, create, task
// and intent records all present) or absent, and the counters equal the
// number of records. In safe mode it also checks one create per intent id.
func audit(tb testing.TB, st *Store, safe bool) auditReport {
	tb.Helper()
	reqs := allRecords(tb, st, RecordRequests, "").Requests
	creates := allRecords(tb, st, RecordCreates, "").Creates
	tasks := allRecords(tb, st, RecordTasks, "").Tasks
	intents := allRecords(tb, st, RecordIntents, "").Intents
	rep := auditReport{
		counts:        st.Stats(),
		createsPer:    map[string]int{},
		tasksPer:      map[string]int{},
		requestsPer:   map[string]int{},
		intentRecords: map[string]FirstResult{},
	}
	got := counts(int64(len(reqs)), int64(len(creates)), int64(len(tasks)))
	if rep.counts != got {
		tb.Errorf("counters %+v, records %+v", rep.counts, got)
	}
	for i, r := range reqs {
		if r.Seq != uint64(i+1) {
			tb.Errorf("request %d has seq %d; sequences must be dense", i+1, r.Seq)
		}
		rep.requestsPer[r.IntentID]++
	}
	for _, fr := range intents {
		if _, dup := rep.intentRecords[fr.IntentID]; dup {
			tb.Errorf("intent %q listed twice", fr.IntentID)
		}
		rep.intentRecords[fr.IntentID] = fr
	}
	taskByID := map[string]TaskRecord{}
	for i, tr := range tasks {
		if want := FormatTaskID(uint64(i + 1)); tr.TaskID != want || tr.Seq != uint64(i+1) {
			tb.Errorf("task %d is %s (seq %d), want %s", i+1, tr.TaskID, tr.Seq, want)
		}
		taskByID[tr.TaskID] = tr
		rep.tasksPer[tr.IntentID]++
	}
	createByReq := map[uint64]CreateRecord{}
	for i, c := range creates {
		if c.Seq != uint64(i+1) {
			tb.Errorf("create %d has seq %d", i+1, c.Seq)
		}
		createByReq[c.RequestSeq] = c
		rep.createsPer[c.IntentID]++
		if tr, ok := taskByID[c.TaskID]; !ok || tr.IntentID != c.IntentID {
			tb.Errorf("create %d names task %s, which does not exist for %q", c.Seq, c.TaskID, c.IntentID)
		}
		if c.RequestSeq == 0 || c.RequestSeq > uint64(len(reqs)) {
			tb.Errorf("create %d names request %d, which does not exist", c.Seq, c.RequestSeq)
			continue
		}
		if r := reqs[c.RequestSeq-1]; r.Outcome != OutcomeCreated || r.TaskID != c.TaskID {
			tb.Errorf("create %d: request %d says %s %s", c.Seq, r.Seq, r.Outcome, r.TaskID)
		}
	}
	for _, r := range reqs {
		if r.Outcome == OutcomeRefused {
			// A refused request creates nothing and binds nothing.
			if _, ok := createByReq[r.Seq]; ok || r.TaskID != "" || r.Refusal == nil {
				tb.Errorf("request %d is refused, yet it has a create record or a task id, or no refusal: %+v", r.Seq, r)
			}
			continue
		}
		if r.Refusal != nil {
			tb.Errorf("request %d is %s with a refusal: %+v", r.Seq, r.Outcome, r.Refusal)
		}
		fr, known := rep.intentRecords[r.IntentID]
		if !known {
			tb.Errorf("request %d for %q has no intent record", r.Seq, r.IntentID)
			continue
		}
		switch r.Outcome {
		case OutcomeCreated:
			c, ok := createByReq[r.Seq]
			if !ok || c.TaskID != r.TaskID {
				tb.Errorf("request %d created %s but no create record says so", r.Seq, r.TaskID)
			}
			if safe && (fr.RequestSeq != r.Seq || fr.TaskID != r.TaskID || fr.RequestDigest != r.RequestDigest) {
				tb.Errorf("request %d created %s but the intent record says %+v", r.Seq, r.TaskID, fr)
			}
		case OutcomeReplayed, OutcomeConflict:
			if _, ok := createByReq[r.Seq]; ok {
				tb.Errorf("request %d is %s but has a create record", r.Seq, r.Outcome)
			}
			if fr.RequestSeq >= r.Seq || fr.TaskID != r.TaskID {
				tb.Errorf("request %d is %s of %s, intent record %+v", r.Seq, r.Outcome, r.TaskID, fr)
			}
			if same := fr.RequestDigest == r.RequestDigest; same != (r.Outcome == OutcomeReplayed) {
				tb.Errorf("request %d is %s, but digest equal to the first is %v", r.Seq, r.Outcome, same)
			}
		default:
			tb.Errorf("request %d has outcome %q", r.Seq, r.Outcome)
		}
	}
	// The per-key index agrees with the full listings.
	checkKeyListings(tb, st)
	if safe {
		for intent := range rep.intentRecords {
			if rep.createsPer[intent] != 1 || rep.tasksPer[intent] != 1 {
				tb.Errorf("intent %q: %d creates, %d tasks; want exactly one each",
					intent, rep.createsPer[intent], rep.tasksPer[intent])
			}
		}
	}
	return rep
}
