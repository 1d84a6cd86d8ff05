package provider

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sendtwice/sendtwice/internal/queue"
)

// Key layout. Every record kind has its own one-byte prefix; sequences are
// 8-byte big-endian so that keys sort by sequence.
//
//	m                                   counters and sequences (metaRecord)
//	r <seq>                             RequestRecord, one per request received
//	c <seq>                             CreateRecord, one per create executed
//	t <seq>                             TaskRecord, one per task that exists
//	i <intent id>                       FirstResult, the first digest and result
//	o <request seq>                     intent id, orders the intent records
//	x <intent id> 0x00 <kind> <seq>     per-intent index of r, c and t records
//
// Intent ids never contain control characters, so 0x00 ends one safely.
const (
	prefixMeta        = 'm'
	prefixRequest     = 'r'
	prefixCreate      = 'c'
	prefixTask        = 't'
	prefixIntent      = 'i'
	prefixIntentOrder = 'o'
	prefixIndex       = 'x'
)

// metaFormat is the layout version written in the meta record.
const metaFormat = 1

// maxGroup bounds the create calls committed in one batch.
const maxGroup = 256

// queueLen is how many create calls may wait for the writer.
const queueLen = 1024

// Options configure a Store.
type Options struct {
	FS     vfs.FS           // nil = vfs.Default; tests pass vfs.NewCrashableMem()
	Clock  func() time.Time // nil = time.Now
	Logger *slog.Logger     // nil = slog.Default()
	// UnsafeCreateEveryCall is a test-only broken mode: every call creates a new task even
	// for a known intent id (used to prove the auditor can fail). Logged loudly at Open.
	UnsafeCreateEveryCall bool
}

// metaRecord is the value of the meta key: the store's identity, the
// counters and the last task number, updated in the same batch as the
// records they count.
type metaRecord struct {
	Format int `json:"format"`
	// StoreID is created with the store and never changes; a store made
	// before ids existed gets one when it is next opened.
	StoreID          string `json:"store_id,omitempty"`
	RequestsReceived int64  `json:"requests_received"`
	CreatesExecuted  int64  `json:"creates_executed"`
	TasksExisting    int64  `json:"tasks_existing"`
	LastTaskNumber   uint64 `json:"last_task_number"`
}

func (m metaRecord) counts() Counts {
	return Counts{
		RequestsReceived: m.RequestsReceived,
		CreatesExecuted:  m.CreatesExecuted,
		TasksExisting:    m.TasksExisting,
	}
}

// Store is the Pebble-backed state of the fake task service. Create calls are
// decided and committed by one writer goroutine; reads may run concurrently.
type Store struct {
	db     *pebble.DB
	id     string // the store id, fixed at Open
	clock  func() time.Time
	log    *slog.Logger
	unsafe bool

	// mu guards closed and sending on queue, so that Close never races a send.
	mu     sync.RWMutex
	closed bool
	queue  chan *createOp
	done   chan struct{} // closed when the writer has stopped

	meta metaRecord // owned by the writer goroutine after Open

	countsMu sync.Mutex
	counts   Counts // as of the last commit
}

// createOp is one create call waiting for the writer.
type createOp struct {
	req       CreateRequest
	dropReply bool // recorded as reply_dropped on the request record
	// refused, when set, is why the call does not match its request: it is
	// recorded as a refused request, creates nothing, and is answered with
	// a *RefusedError.
	refused *Refusal
	// done is called exactly once by the writer, after the commit (or its
	// failure), with this call's result.
	done func(CreateResponse, error)
	// mayCommit, when set, is asked by the writer just before the call is
	// decided and written; an error leaves the call out of the group and
	// answers it with that error.
	mayCommit func() error
}

// ErrDirInUse means that another process has the store's directory open.
var ErrDirInUse = errors.New("provider: data directory in use")

// Open opens (or creates) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("component", "provider-store")
	db, err := pebble.Open(dir, pebbleOptions(opts.FS, log))
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %q: another process holds it (one service per data directory); stop it, or give this one another data directory: %w", ErrDirInUse, dir, err)
		}
		return nil, fmt.Errorf("open pebble in %q: %w", dir, err)
	}
	meta, found, err := loadMeta(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if meta.StoreID == "" {
		if meta.StoreID, err = newStoreID(); err == nil {
			// The id is durable before anyone can see it in a reply.
			err = putMeta(db, meta)
		}
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("provider: give the store in %q an id: %w", dir, err)
		}
		abs, aerr := filepath.Abs(dir)
		if aerr != nil {
			abs = dir
		}
		if !found {
			log.Warn("new store: no task, request or counter exists here yet; if the service ran before, check the data directory",
				"dir", abs, "store_id", meta.StoreID)
		} else {
			log.Info("store had no id; gave it one", "dir", abs, "store_id", meta.StoreID)
		}
	}
	s := &Store{
		db:     db,
		id:     meta.StoreID,
		clock:  opts.Clock,
		log:    log,
		unsafe: opts.UnsafeCreateEveryCall,
		queue:  make(chan *createOp, queueLen),
		done:   make(chan struct{}),
		meta:   meta,
		counts: meta.counts(),
	}
	if s.unsafe {
		log.Error("UNSAFE MODE: every create call creates a new task, even for a known intent id; for tests of the audit only",
			"option", "UnsafeCreateEveryCall")
	}
	log.Info("store opened", "dir", dir, "store_id", meta.StoreID,
		"requests_received", meta.RequestsReceived,
		"creates_executed", meta.CreatesExecuted,
		"tasks_existing", meta.TasksExisting)
	go s.run()
	return s, nil
}

// blockCacheBytes sizes Pebble's block cache. Every create call reads its
// intent id, and Pebble reads each file's index and bloom filter blocks
// through this cache: once a store's data outgrows the cache, those blocks
// are evicted and read again from the files, and a lookup cost grew from
// about 6 to 17 µs over six drains of 30,000 approvals with 64 MiB. 256 MiB
// holds the index and filter blocks of a store of several million intents.
// The service's memory stays bounded by it plus two memtables (MemTableSize)
// and a small Go heap.
const blockCacheBytes = 256 << 20

// pebbleOptions are the Pebble settings of a store. Bloom filters on every
// level keep the point read of an intent id that was never seen (the
// "created" path) cheap however many intents are stored.
func pebbleOptions(fs vfs.FS, log *slog.Logger) *pebble.Options {
	o := &pebble.Options{
		FS:           fs,
		Logger:       pebbleLogger{log: log},
		CacheSize:    blockCacheBytes,
		MemTableSize: 32 << 20,
	}
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	return o
}

// loadMeta reads the meta record; found is false for a new store.
func loadMeta(db *pebble.DB) (m metaRecord, found bool, err error) {
	found, err = getJSON(db, []byte{prefixMeta}, &m)
	if err != nil {
		return metaRecord{}, false, fmt.Errorf("load counters: %w", err)
	}
	if !found {
		return metaRecord{Format: metaFormat}, false, nil
	}
	if m.Format != metaFormat {
		return metaRecord{}, false, fmt.Errorf("load counters: layout version %d, want %d: %w", m.Format, metaFormat, ErrCorrupt)
	}
	return m, true, nil
}

// putMeta writes the meta record alone, synced.
func putMeta(db *pebble.DB, m metaRecord) error {
	val, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return db.Set([]byte{prefixMeta}, val, pebble.Sync)
}

// storeIDPrefix starts every store id.
const storeIDPrefix = "store-"

// newStoreID returns "store-" and 16 random hex digits.
func newStoreID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return storeIDPrefix + hex.EncodeToString(b[:]), nil
}

// ID returns the store's id ("store-" and 16 hex digits). It is created with
// the store, kept in its meta record and never changes; two stores never
// share one unless a data directory was copied.
func (s *Store) ID() string { return s.id }

// Close stops accepting create calls, lets the writer finish the calls it
// has accepted, and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close pebble: %w", err)
	}
	return nil
}

// Stats returns the counters as of the last commit.
func (s *Store) Stats() Counts {
	s.countsMu.Lock()
	defer s.countsMu.Unlock()
	return s.counts
}

// Create validates req, checks it against its request document, and decides
// it: created, replayed or idempotency_conflict. A call that does not match
// its request is recorded as refused and answered with a *RefusedError
// (errors.Is(err, ErrRefused)); an invalid one is refused unrecorded
// (ErrInvalidRequest). It returns once the call's effect is committed. If
// ctx ends first, Create returns ctx's error, but a call already handed to
// the writer may still be committed, exactly like a reply lost on the way.
func (s *Store) Create(ctx context.Context, req CreateRequest) (CreateResponse, error) {
	req, refused, err := checkCreate(req)
	if err != nil {
		return CreateResponse{}, err
	}
	type result struct {
		resp CreateResponse
		err  error
	}
	ch := make(chan result, 1)
	err = s.submit(&createOp{req: req, refused: refused, done: func(resp CreateResponse, err error) {
		ch <- result{resp, err}
	}})
	if err != nil {
		return CreateResponse{}, err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return CreateResponse{}, fmt.Errorf("create %q: %w", req.IntentID, ctx.Err())
	}
}

// submit hands a validated call to the writer. done is called exactly once,
// from the writer goroutine, unless submit returns an error.
func (s *Store) submit(op *createOp) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	s.queue <- op
	return nil
}

// run is the writer: it takes the calls waiting, commits them as one synced
// batch, then answers them.
func (s *Store) run() {
	defer close(s.done)
	group := make([]*createOp, 0, maxGroup)
	for op := range s.queue {
		group = queue.Append(group[:0], op, s.queue, maxGroup)
		s.commitGroup(group)
		clear(group)
	}
}

// commitGroup decides the calls in order, writes all of their records and
// the counters into one batch and commits it with pebble.Sync. Then it
// answers every call: with its result if the commit succeeded, with the
// error otherwise.
//
// What a commit error means: Pebble returns one only for a batch it refused
// before writing it (for example a store opened read-only), and then nothing
// of the group was applied. A failure to write or sync the write-ahead log is
// not returned: Pebble may already have applied the batch to its memtable,
// where reads would see it, and calls its logger's Fatalf, which panics here
// (pebbleLogger) and ends the process before any call of the group is
// answered. After a restart the log holds the whole batch or none of it.
func (s *Store) commitGroup(group []*createOp) {
	resps := make([]CreateResponse, len(group))
	errs := make([]error, len(group))
	m := s.meta
	b := s.db.NewBatch()
	defer b.Close()
	w := batchWriter{b: b}
	decided := make(map[string]FirstResult, len(group))
	included := 0
	for i, op := range group {
		if op.mayCommit != nil {
			if err := op.mayCommit(); err != nil {
				errs[i] = err
				continue
			}
		}
		if op.refused != nil {
			resps[i] = s.decide(&w, &m, op, FirstResult{}, false, decided)
			included++
			continue
		}
		first, found, err := s.lookupIntent(op.req.IntentID, decided)
		if err != nil {
			errs[i] = err
			continue
		}
		resps[i] = s.decide(&w, &m, op, first, found, decided)
		included++
	}
	var err error
	if included > 0 {
		w.putJSON([]byte{prefixMeta}, m)
		err = w.err
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		if err != nil {
			err = fmt.Errorf("commit %d create calls: %w", included, err)
			s.log.Error("commit refused; no call of the group was applied", "calls", included, "err", err)
		} else {
			s.meta = m
			s.countsMu.Lock()
			s.counts = m.counts()
			s.countsMu.Unlock()
		}
	}
	for i, op := range group {
		switch {
		case errs[i] != nil:
			op.done(CreateResponse{}, errs[i])
		case err != nil:
			op.done(CreateResponse{}, err)
		case op.refused != nil:
			op.done(resps[i], &RefusedError{Refusal: *op.refused, RequestSeq: resps[i].RequestSeq})
		default:
			op.done(resps[i], nil)
		}
	}
}

// lookupIntent finds the first result of an intent id: decided earlier in
// this group, or committed before.
func (s *Store) lookupIntent(id string, decided map[string]FirstResult) (FirstResult, bool, error) {
	if fr, ok := decided[id]; ok {
		return fr, true, nil
	}
	var fr FirstResult
	found, err := getJSON(s.db, intentKey(id), &fr)
	if err != nil {
		return FirstResult{}, false, fmt.Errorf("read intent %q: %w", id, err)
	}
	return fr, found, nil
}

// decide applies one call to m and w and returns its response.
func (s *Store) decide(w *batchWriter, m *metaRecord, op *createOp, first FirstResult, found bool, decided map[string]FirstResult) CreateResponse {
	req := op.req
	now := s.clock().UTC().Format(time.RFC3339Nano)
	m.RequestsReceived++
	seq := uint64(m.RequestsReceived)
	rec := RequestRecord{
		Seq:           seq,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		RequestID:     req.RequestID,
		CallRef:       req.CallRef,
		ReceivedAt:    now,
		ReplyDropped:  op.dropReply,
	}
	var resp CreateResponse
	switch {
	case op.refused != nil:
		// Recorded as received, so that the attempt stays on the record;
		// nothing is created and no intent record is touched.
		refusal := *op.refused
		rec.Outcome, rec.Refusal = OutcomeRefused, &refusal
		resp = CreateResponse{Outcome: OutcomeRefused}
	case !found || s.unsafe:
		m.CreatesExecuted++
		m.TasksExisting++
		m.LastTaskNumber++
		createSeq := uint64(m.CreatesExecuted)
		taskSeq := m.LastTaskNumber
		taskID := FormatTaskID(taskSeq)
		fr := FirstResult{
			IntentID:      req.IntentID,
			RequestDigest: req.RequestDigest,
			RequestID:     req.RequestID,
			TaskID:        taskID,
			CreatedAt:     now,
			RequestSeq:    seq,
		}
		w.putJSON(seqKey(prefixCreate, createSeq), CreateRecord{
			Seq:           createSeq,
			IntentID:      req.IntentID,
			RequestDigest: req.RequestDigest,
			TaskID:        taskID,
			RequestSeq:    seq,
			CreatedAt:     now,
		})
		w.put(indexKey(req.IntentID, prefixCreate, createSeq), nil)
		w.putJSON(seqKey(prefixTask, taskSeq), TaskRecord{
			Seq:       taskSeq,
			TaskID:    taskID,
			IntentID:  req.IntentID,
			Task:      req.Task,
			CreatedAt: now,
		})
		w.put(indexKey(req.IntentID, prefixTask, taskSeq), nil)
		if !found {
			// The first result is written once and never overwritten.
			w.putJSON(intentKey(req.IntentID), fr)
			w.put(seqKey(prefixIntentOrder, seq), []byte(req.IntentID))
			decided[req.IntentID] = fr
		}
		rec.Outcome, rec.TaskID = OutcomeCreated, taskID
		resp = CreateResponse{Outcome: OutcomeCreated, TaskID: taskID, First: fr}
	case first.RequestDigest == req.RequestDigest:
		rec.Outcome, rec.TaskID = OutcomeReplayed, first.TaskID
		resp = CreateResponse{Outcome: OutcomeReplayed, TaskID: first.TaskID, First: first}
	default:
		rec.Outcome, rec.TaskID = OutcomeConflict, first.TaskID
		resp = CreateResponse{Outcome: OutcomeConflict, TaskID: first.TaskID, First: first}
	}
	w.putJSON(seqKey(prefixRequest, seq), rec)
	w.put(indexKey(req.IntentID, prefixRequest, seq), nil)
	resp.Counts = m.counts()
	resp.RequestSeq = seq
	resp.StoreID = m.StoreID
	return resp
}

// FormatTaskID renders task number n as fake-task-0001, ..., fake-task-9999,
// fake-task-10000, ...
func FormatTaskID(n uint64) string {
	return fmt.Sprintf("fake-task-%04d", n)
}

// Records returns one page of one kind of record, by sequence or for one
// intent id.
func (s *Store) Records(req RecordsRequest) (RecordsResponse, error) {
	limit, err := validateRecords(req)
	if err != nil {
		return RecordsResponse{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return RecordsResponse{}, ErrClosed
	}
	resp := RecordsResponse{Kind: req.Kind}
	if req.Kind == RecordIntents {
		err = s.intentRecords(req, limit, &resp)
	} else {
		err = s.seqRecords(req, limit, &resp)
	}
	if err != nil {
		return RecordsResponse{}, fmt.Errorf("read %s records: %w", req.Kind, err)
	}
	return resp, nil
}

func (s *Store) seqRecords(req RecordsRequest, limit int, resp *RecordsResponse) error {
	var kind byte
	switch req.Kind {
	case RecordRequests:
		kind = prefixRequest
	case RecordCreates:
		kind = prefixCreate
	case RecordTasks:
		kind = prefixTask
	}
	add := func(seq uint64, val []byte) error {
		var err error
		switch kind {
		case prefixRequest:
			var r RequestRecord
			err = json.Unmarshal(val, &r)
			resp.Requests = append(resp.Requests, r)
		case prefixCreate:
			var r CreateRecord
			err = json.Unmarshal(val, &r)
			resp.Creates = append(resp.Creates, r)
		case prefixTask:
			var r TaskRecord
			err = json.Unmarshal(val, &r)
			resp.Tasks = append(resp.Tasks, r)
		}
		if err != nil {
			return fmt.Errorf("record %c %d: %w: %v", kind, seq, ErrCorrupt, err)
		}
		return nil
	}
	if req.IntentID == "" {
		next, err := s.page(seqPrefix(kind), req.AfterSeq, limit, add)
		resp.NextSeq = next
		return err
	}
	// One intent: walk its index and read each record by key.
	next, err := s.page(indexPrefix(req.IntentID, kind), req.AfterSeq, limit, func(seq uint64, _ []byte) error {
		val, ok, err := getRaw(s.db, seqKey(kind, seq))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("index names record %c %d that does not exist: %w", kind, seq, ErrCorrupt)
		}
		return add(seq, val)
	})
	resp.NextSeq = next
	return err
}

func (s *Store) intentRecords(req RecordsRequest, limit int, resp *RecordsResponse) error {
	if req.IntentID != "" {
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(req.IntentID), &fr)
		if err != nil {
			return err
		}
		if found && fr.RequestSeq > req.AfterSeq {
			resp.Intents = append(resp.Intents, fr)
		}
		return nil
	}
	// Intent records in the order they were first seen, paged by the
	// sequence of the request that created them.
	next, err := s.page(seqPrefix(prefixIntentOrder), req.AfterSeq, limit, func(seq uint64, val []byte) error {
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(string(val)), &fr)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("intent %q listed at %d does not exist: %w", val, seq, ErrCorrupt)
		}
		resp.Intents = append(resp.Intents, fr)
		return nil
	})
	resp.NextSeq = next
	return err
}

// page calls fn for up to limit keys prefix+<seq> with seq > after, in order.
// It returns the sequence to continue after, or 0 when the page is the last.
func (s *Store) page(prefix []byte, after uint64, limit int, fn func(seq uint64, val []byte) error) (uint64, error) {
	if after == ^uint64(0) {
		return 0, nil
	}
	lower := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	n := 0
	var last uint64
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != len(prefix)+8 {
			_ = it.Close()
			return 0, fmt.Errorf("key %q: %w", key, ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(key[len(prefix):])
		if n == limit {
			// There is more after this page.
			_ = it.Close()
			return last, nil
		}
		val, err := it.ValueAndErr()
		if err == nil {
			err = fn(seq, val)
		}
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		last = seq
		n++
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return 0, nil
}

// batchWriter collects puts and keeps the first error.
type batchWriter struct {
	b   *pebble.Batch
	err error
}

func (w *batchWriter) put(key, val []byte) {
	if w.err == nil {
		w.err = w.b.Set(key, val, nil)
	}
}

func (w *batchWriter) putJSON(key []byte, v any) {
	if w.err != nil {
		return
	}
	val, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.err = w.b.Set(key, val, nil)
}

func seqPrefix(kind byte) []byte { return []byte{kind} }

func seqKey(kind byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, seq)
}

func intentKey(id string) []byte {
	return append([]byte{prefixIntent}, id...)
}

func indexPrefix(id string, kind byte) []byte {
	k := make([]byte, 0, len(id)+3)
	k = append(k, prefixIndex)
	k = append(k, id...)
	return append(k, 0, kind)
}

func indexKey(id string, kind byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(id, kind), seq)
}

// prefixEnd is the smallest key greater than every key with this prefix.
// Every prefix used here ends in a byte below 0xff.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	return end
}

// getRaw reads one key, copying its value.
func getRaw(db *pebble.DB, key []byte) ([]byte, bool, error) {
	val, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), val...)
	if err := closer.Close(); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// getJSON reads one key and decodes its JSON value into v.
func getJSON(db *pebble.DB, key []byte, v any) (bool, error) {
	val, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = json.Unmarshal(val, v)
	cerr := closer.Close()
	if err != nil {
		return false, fmt.Errorf("key %q: %w: %v", key, ErrCorrupt, err)
	}
	return true, cerr
}

// pebbleLogger sends Pebble's own messages to slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "source", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "source", "pebble", "fatal", true)
	panic(msg)
}
