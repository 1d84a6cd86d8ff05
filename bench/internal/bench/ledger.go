package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The ledger reference: what a team would build instead of this project. A
// JetStream consumer records each intent in PostgreSQL, keyed by the intent
// id, with the first request digest and result; publishes a receipt; acks.
//
// Names of its streams and consumer.
const (
	ledgerIn       = "BENCH_LEDGER_IN"
	ledgerOut      = "BENCH_LEDGER_OUT"
	ledgerConsumer = "ledger"
)

// Ledger modes (Options.Ledger).
const (
	LedgerAuto = "auto" // measured when PostgreSQL is installed, else skipped with a line in the report
	LedgerOn   = "on"   // measured; the run fails without PostgreSQL
	LedgerOff  = "off"  // not measured
)

// The ledger's schema and its two statements, prepared on every connection
// of the pool.
const (
	ledgerSchema = `CREATE TABLE intents (
	intent_id      text PRIMARY KEY,
	request_digest text NOT NULL,
	request_id     text NOT NULL,
	approval_id    text NOT NULL,
	task_id        bigint GENERATED ALWAYS AS IDENTITY,
	created_at     timestamptz NOT NULL DEFAULT now()
)`
	// The first record is never overwritten: a second insert under the
	// same intent id does nothing and returns no row.
	ledgerInsert = `INSERT INTO intents (intent_id, request_digest, request_id, approval_id)
VALUES ($1, $2, $3, $4) ON CONFLICT (intent_id) DO NOTHING RETURNING task_id`
	ledgerFirst = `SELECT request_digest, task_id FROM intents WHERE intent_id = $1`

	ledgerInsertStmt = "ledger_insert"
	ledgerFirstStmt  = "ledger_first"
)

// ledgerOutcome is what the ledger decided for one message.
type ledgerOutcome struct {
	outcome string
	intent  string
	task    int64
}

// ledgerRun is the ledger reference's figures and its own check.
type ledgerRun struct {
	ref      *reference
	outcomes map[string]int
	rows     int // rows in the ledger at the end
	distinct int
	problems []string
	// results holds each message's outcome, by stream sequence - 1.
	results []ledgerOutcome
}

// decide turns the insert's answer and the first record into an outcome:
// created when this transaction inserted the row; otherwise replayed when
// the first record has the same request digest, idempotency_conflict when
// not. The task id is always the first record's.
func decide(inserted bool, digest, firstDigest string) string {
	switch {
	case inserted:
		return document.OutcomeCreated
	case firstDigest == digest:
		return document.OutcomeReplayed
	default:
		return document.OutcomeConflict
	}
}

// ledgerPool opens a pool of size connections to the cluster, each with the
// ledger's statements prepared, and opens all of them before it returns (so
// that no connection is made during the measurement).
func ledgerPool(ctx context.Context, dsn string, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: the ledger's connection string: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = int32(size), int32(size)
	cfg.MaxConnIdleTime, cfg.MaxConnLifetime = time.Hour, time.Hour
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Prepare(ctx, ledgerInsertStmt, ledgerInsert); err != nil {
			return err
		}
		_, err := c.Prepare(ctx, ledgerFirstStmt, ledgerFirst)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: the ledger's connection pool: %w", err)
	}
	conns := make([]*pgxpool.Conn, 0, size)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range size {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench: connecting to the ledger: %w", err)
		}
		conns = append(conns, c)
	}
	return pool, nil
}

// record runs one intent's transaction: the insert and the read of the first
// record, sent together and run as one implicit transaction (the extended
// protocol runs everything up to its Sync in one), so one round trip. With
// synchronous_commit on, a created row is on disk when this returns.
func record(ctx context.Context, pool *pgxpool.Pool, intent, digest, requestID, approvalID string) (outcome string, task int64, err error) {
	b := &pgx.Batch{}
	b.Queue(ledgerInsertStmt, intent, digest, requestID, approvalID)
	b.Queue(ledgerFirstStmt, intent)
	br := pool.SendBatch(ctx, b)
	var inserted int64
	ierr := br.QueryRow().Scan(&inserted)
	if ierr != nil && !errors.Is(ierr, pgx.ErrNoRows) {
		_ = br.Close()
		return "", 0, fmt.Errorf("bench: the ledger's insert: %w", ierr)
	}
	var firstDigest string
	if err := br.QueryRow().Scan(&firstDigest, &task); err != nil {
		_ = br.Close()
		return "", 0, fmt.Errorf("bench: reading the ledger's first record: %w", err)
	}
	if err := br.Close(); err != nil {
		return "", 0, fmt.Errorf("bench: the ledger's transaction: %w", err)
	}
	return decide(ierr == nil, digest, firstDigest), task, nil
}

// ledgerIDs are what the ledger reads from an envelope. No gate: the
// envelope is decoded with encoding/json and trusted; the request digest is
// computed from the request as sent (RFC 8785, as the pipeline's), not taken
// from the approval, so that the ledger compares what it was asked to do.
func ledgerIDs(envelope []byte) (intent, digest, requestID, approvalID string, err error) {
	var env struct {
		Request  json.RawMessage `json:"request"`
		Approval *struct {
			ApprovalID string `json:"approval_id"`
		} `json:"approval"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return "", "", "", "", fmt.Errorf("bench: decoding an envelope: %w", err)
	}
	var req struct {
		RequestID string `json:"request_id"`
		IntentID  string `json:"intent_id"`
	}
	if err := json.Unmarshal(env.Request, &req); err != nil {
		return "", "", "", "", fmt.Errorf("bench: decoding a request: %w", err)
	}
	if req.IntentID == "" {
		return "", "", "", "", errors.New("bench: a request without an intent id")
	}
	if digest, err = canon.Digest(env.Request); err != nil {
		return "", "", "", "", fmt.Errorf("bench: the request's digest: %w", err)
	}
	if env.Approval != nil {
		approvalID = env.Approval.ApprovalID
	}
	return req.IntentID, digest, req.RequestID, approvalID, nil
}

// ledgerReference measures the conventional design on w: k instances of c
// handlers consume the approvals from a stream of their own; each handler
// runs the intent's transaction in PostgreSQL (a pool of poolSize
// connections per instance), publishes the receipt alone to a second stream
// (file storage, the server's sync setting, as the pipeline's receipts) and
// waits for its ack, then acks the message. No gate. Both streams are made
// for the measurement and deleted after it; the ledger's table is made on
// the private cluster pg.
func (s *stack) ledgerReference(ctx context.Context, pg *pgCluster, w *Workload, k, c, poolSize int) (*ledgerRun, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	n := len(w.Envelopes)
	if err := s.makeStreams(ctx,
		jetstream.StreamConfig{Name: ledgerIn, Subjects: []string{"bench.ledger.in.>"}, AllowAtomicPublish: true},
		jetstream.StreamConfig{Name: ledgerOut, Subjects: []string{"bench.ledger.out.>"}},
	); err != nil {
		return nil, err
	}
	defer s.deleteStreams(ledgerIn, ledgerOut)
	if err := createLedgerTable(ctx, pg.dsn); err != nil {
		return nil, err
	}
	if err := s.storeLedgerBacklog(ctx, w); err != nil {
		return nil, err
	}
	cons, err := s.refConsumer(ctx, ledgerIn, ledgerConsumer)
	if err != nil {
		return nil, err
	}
	// Connections first (nothing is timed yet).
	pools, err := ledgerPools(ctx, pg.dsn, k, poolSize)
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	res := &ledgerResults{results: make([]ledgerOutcome, n)}
	took, err := s.runInstances(ctx, cons, "bench-ledger-", k, c, fmt.Sprintf("ledger: %d×%d handlers", k, c), n,
		func(i int, in refInstance) refSink {
			return &ledgerSink{refInstance: in, pool: pools[i], executorID: "ledger-" + strconv.Itoa(i+1), res: res}
		})
	if err != nil {
		return nil, err
	}
	run := &ledgerRun{outcomes: map[string]int{}, distinct: w.Distinct, results: res.results}
	if err := pools[0].QueryRow(ctx, "SELECT count(*) FROM intents").Scan(&run.rows); err != nil {
		return nil, fmt.Errorf("bench: counting the ledger's rows: %w", err)
	}
	run.check(res.results)
	run.ref = &reference{name: "JetStream + PostgreSQL ledger", n: n, took: took, unit: "approvals/s",
		what: fmt.Sprintf("%d×%d handlers, a pool of %d connections each; consume, one transaction per approval (INSERT … ON CONFLICT (intent_id) DO NOTHING, first record read back, digest compared; synchronous_commit on, fsync on), publish the %d-byte receipt alone and wait for its ack, ack; no gate; %s",
			k, c, poolSize, res.receiptBytes.Load(), pg.bin.version)}
	return run, nil
}

// createLedgerTable creates the ledger's table.
func createLedgerTable(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("bench: connecting to the ledger: %w", err)
	}
	_, err = conn.Exec(ctx, ledgerSchema)
	_ = conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("bench: creating the ledger's table: %w", err)
	}
	return nil
}

// storeLedgerBacklog stores the workload's envelopes on the ledger's input
// stream.
func (s *stack) storeLedgerBacklog(ctx context.Context, w *Workload) error {
	subjects := make([]string, len(w.Subjects))
	for i, subj := range w.Subjects {
		subjects[i] = "bench.ledger.in." + strings.TrimPrefix(subj, "approvals.")
	}
	bar := newProgress(s.o.Status, s.o.Terminal)
	bar.begin("ledger: storing", len(subjects))
	_, err := storeAll(ctx, s.nc, ledgerIn, subjects, w.Envelopes, s.o.PublishBatch, bar.set)
	bar.end()
	return err
}

// ledgerPools opens k pools of size connections each; the pools opened stay
// in the slice returned, also on error, for the caller to close.
func ledgerPools(ctx context.Context, dsn string, k, size int) ([]*pgxpool.Pool, error) {
	pools := make([]*pgxpool.Pool, 0, k)
	for range k {
		p, err := ledgerPool(ctx, dsn, size)
		if err != nil {
			return pools, err
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// ledgerResults is what each message came to, by its stream sequence (1..n:
// the stream is new), and the size of a receipt.
type ledgerResults struct {
	mu           sync.Mutex
	results      []ledgerOutcome
	receiptBytes atomic.Int64
}

// ledgerSink is one ledger instance's handling of a message: record the
// intent in PostgreSQL, publish the receipt alone, ack.
type ledgerSink struct {
	refInstance
	pool       *pgxpool.Pool
	executorID string
	res        *ledgerResults
}

func (l *ledgerSink) handle(msg jetstream.Msg) {
	if err := l.record(msg); err != nil {
		l.fails.add(err)
		_ = msg.Nak()
	}
}

func (l *ledgerSink) close() {}

func (l *ledgerSink) record(msg jetstream.Msg) error {
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	intent, digest, requestID, approvalID, err := ledgerIDs(msg.Data())
	if err != nil {
		return err
	}
	outcome, task, err := record(l.ctx, l.pool, intent, digest, requestID, approvalID)
	if err != nil {
		return err
	}
	attempt := nuid.Next()
	taskID := "ledger-task-" + strconv.FormatInt(task, 10)
	r := document.Receipt{
		SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-" + attempt, Outcome: outcome,
		IntentID: &intent, RequestID: &requestID, ApprovalID: &approvalID, TaskID: &taskID,
		Delivery: document.Delivery{StreamSeq: meta.Sequence.Stream, Delivered: meta.NumDelivered, Attempt: attempt, Executor: l.executorID},
		IssuedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}
	body, err := json.Marshal(&r)
	if err != nil {
		return fmt.Errorf("bench: encoding a receipt: %w", err)
	}
	l.res.receiptBytes.Store(int64(len(body)))
	m := nats.NewMsg("bench.ledger.out." + strings.TrimPrefix(subjects.Receipt("", intent), "receipts."))
	m.Data = body
	m.Header.Set(topology.HeaderOutcome, outcome)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
	m.Header.Set(topology.HeaderDelivered, strconv.FormatUint(meta.NumDelivered, 10))
	pctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	_, err = l.js.PublishMsg(pctx, m, jetstream.WithMsgID(r.ReceiptID), jetstream.WithExpectStream(ledgerOut))
	cancel()
	if err != nil {
		return fmt.Errorf("bench: storing a ledger receipt: %w", err)
	}
	if seq := meta.Sequence.Stream; seq >= 1 && seq <= uint64(len(l.res.results)) {
		l.res.mu.Lock()
		l.res.results[seq-1] = ledgerOutcome{outcome: outcome, intent: intent, task: task}
		l.res.mu.Unlock()
	}
	return msg.Ack()
}

// check holds the ledger to the pipeline's rules: every message has an
// outcome; one created per distinct intent and as many rows; all outcomes
// of an intent name its first record's task.
func (r *ledgerRun) check(results []ledgerOutcome) {
	fail := func(format string, args ...any) {
		if len(r.problems) < 10 {
			r.problems = append(r.problems, fmt.Sprintf(format, args...))
		}
	}
	task := map[string]int64{}
	created := map[string]int{}
	for i, res := range results {
		if res.outcome == "" {
			fail("message %d has no outcome", i+1)
			continue
		}
		r.outcomes[res.outcome]++
		if res.outcome == document.OutcomeCreated {
			created[res.intent]++
		}
		if t, ok := task[res.intent]; ok && t != res.task {
			fail("intent %s: outcomes name tasks %d and %d", res.intent, t, res.task)
		}
		task[res.intent] = res.task
	}
	if r.rows != r.distinct {
		fail("the ledger holds %d rows for %d distinct intents", r.rows, r.distinct)
	}
	if len(created) != r.distinct {
		fail("%d intents were created; want %d", len(created), r.distinct)
	}
	for intent, k := range created {
		if k > 1 {
			fail("intent %s was created %d times", intent, k)
		}
	}
}

func (r *ledgerRun) ok() bool { return len(r.problems) == 0 }

// summary is the ledger's own check in one line.
func (r *ledgerRun) summary() string {
	verdict := "ok"
	if !r.ok() {
		verdict = "FAILED: " + strings.Join(r.problems, "; ")
	}
	return fmt.Sprintf("%s: %s; %d rows = distinct intents %d", verdict, outcomesString(r.outcomes), r.rows, r.distinct)
}

// measureLedger runs the ledger reference on a fresh private cluster,
// unless the run says not to or PostgreSQL is missing (mode auto), in which
// case rep says why it was skipped.
func measureLedger(ctx context.Context, s *stack, st *stages, rep *report) error {
	o := s.o
	if o.Ledger == LedgerOff {
		rep.ledgerSkipped = "not measured (--ledger off)"
		return nil
	}
	bin, err := findPostgres()
	if err != nil {
		if o.Ledger == LedgerAuto && errors.Is(err, ErrNoPostgres) {
			rep.ledgerSkipped = "skipped: " + strings.TrimPrefix(err.Error(), "bench: ")
			fmt.Fprintf(o.Status, "reference JetStream + PostgreSQL ledger %s\n", rep.ledgerSkipped)
			return nil
		}
		return err
	}
	k := o.Executors[0]
	poolSize := o.LedgerPool
	if poolSize <= 0 {
		poolSize = o.Concurrency
	}
	end := st.begin("reference: PostgreSQL cluster start")
	pg, err := startPostgres(ctx, bin, k*poolSize)
	if err != nil {
		return err
	}
	defer pg.stop()
	end()
	end = st.begin(fmt.Sprintf("generate %d approvals (ledger)", o.RefApprovals))
	w, err := generate(workloadSpec{N: o.RefApprovals, Resend: o.Resend, Conflict: o.Conflict, Payload: o.Payload,
		Prefix: o.run + "-ledger", Key: o.key, Now: time.Now(), ApprovalTimeout: 24 * time.Hour, Seed: 1})
	if err != nil {
		return err
	}
	end()
	end = st.begin("reference: JetStream + PostgreSQL ledger")
	run, err := s.ledgerReference(ctx, pg, w, k, o.Concurrency, poolSize)
	if err != nil {
		return fmt.Errorf("bench: the JetStream + PostgreSQL ledger reference: %w", err)
	}
	end()
	rep.ledger = run
	if !run.ok() {
		return fmt.Errorf("bench: the JetStream + PostgreSQL ledger reference failed its check: %s", strings.Join(run.problems, "; "))
	}
	return nil
}
