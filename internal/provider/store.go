package provider

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sendtwice/sendtwice/internal/queue"
)

// Key layout. Every record kind has its own one-byte prefix; sequences are
// 8-byte big-endian so that keys sort by sequence. A key is the pair
// (scope, intent id), written <scope> 0x00 <intent id>: a scope is one
// subject token ([a-z0-9_-]) and intent ids never contain control
// characters, so 0x00 ends either safely.
//
//	m                                   counters and sequences (metaRecord)
//	s <scope>                           ScopeCounts, one scope's counters
//	r <seq>                             RequestRecord, one per request received
//	c <seq>                             CreateRecord, one per create executed
//	t <seq>                             TaskRecord, one per task that exists
//	d <seq>                             DeleteRecord, one per task deleted
//	i <key>                             FirstResult, the first digest and result
//	o <request seq>                     <key>, orders the intent records
//	x <key> 0x00 <kind> <seq>           per-key index of r, c, t and d records
//	e <keep_until ns> <key>             expiry index: when a key may be compacted
//
// Layout version 1 (before scopes) keyed i, o and x by the intent id alone;
// Open moves such a store into version 2, its keys into scope "default".
const (
	prefixMeta        = 'm'
	prefixScope       = 's'
	prefixRequest     = 'r'
	prefixCreate      = 'c'
	prefixTask        = 't'
	prefixDelete      = 'd'
	prefixIntent      = 'i'
	prefixIntentOrder = 'o'
	prefixIndex       = 'x'
	prefixExpiry      = 'e'
)

// metaFormat is the layout version written in the meta record.
const metaFormat = 2

// metaFormatUnscoped is the layout before scopes; Open migrates it.
const metaFormatUnscoped = 1

// maxGroup bounds the create calls committed in one batch.
const maxGroup = 256

// queueLen is how many create calls may wait for the writer.
const queueLen = 1024

// Defaults of a key's lifetime and of compaction (see Options).
const (
	DefaultKeyClockAllowance = 5 * time.Minute
	DefaultKeyMargin         = time.Hour
	DefaultCompactEvery      = time.Minute
	DefaultCompactChunk      = 512
)

// Options configure a Store.
type Options struct {
	FS     vfs.FS           // nil = vfs.Default; tests pass vfs.NewCrashableMem()
	Clock  func() time.Time // nil = time.Now
	Logger *slog.Logger     // nil = slog.Default()
	// UnsafeCreateEveryCall is a test-only broken mode: every call creates a new task even
	// for a known intent id (used to prove the auditor can fail). Logged loudly at Open.
	UnsafeCreateEveryCall bool
	// KeyClockAllowance is how far the executors' clocks may run behind
	// the service's: a key is kept until the latest not_after seen for it
	// plus this plus KeyMargin. 0 = DefaultKeyClockAllowance; negative =
	// none.
	KeyClockAllowance time.Duration
	// KeyMargin is added on top of the allowance (delays in flight, a
	// redelivery waiting in the stream). 0 = DefaultKeyMargin; negative =
	// none.
	KeyMargin time.Duration
	// RecordsRetention is how long request and create records are kept;
	// 0 = forever. Tasks, delete records, keys and counters are kept
	// regardless.
	RecordsRetention time.Duration
	// CompactEvery is how often the background compaction runs; 0 =
	// DefaultCompactEvery; negative = never in the background (Compact
	// still works).
	CompactEvery time.Duration
	// CompactChunk bounds the keys or records removed in one batch of the
	// writer; 0 = DefaultCompactChunk.
	CompactChunk int
}

// orDefault returns d for 0, 0 for a negative value, else v.
func orDefault(v, d time.Duration) time.Duration {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
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
	// Format 2 on: the keys and the deletes.
	DeletesExecuted int64 `json:"deletes_executed"`
	KeysLive        int64 `json:"keys_live"`
	KeysCompacted   int64 `json:"keys_compacted"`
	RecordsRetired  int64 `json:"records_retired"`
}

func (m metaRecord) keys() KeyCounts {
	return KeyCounts{Live: m.KeysLive, Compacted: m.KeysCompacted, TasksDeleted: m.DeletesExecuted, RecordsRetired: m.RecordsRetired}
}

func (m metaRecord) counts() Counts {
	return Counts{
		RequestsReceived: m.RequestsReceived,
		CreatesExecuted:  m.CreatesExecuted,
		TasksExisting:    m.TasksExisting,
	}
}

// Store is the Pebble-backed state of the fake task service. Create calls,
// deletes and compaction are decided and committed by one writer
// goroutine; reads may run concurrently.
type Store struct {
	db     *pebble.DB
	id     string // the store id, fixed at Open
	clock  func() time.Time
	log    *slog.Logger
	unsafe bool

	allowance, margin, retention time.Duration
	chunk                        int

	// mu guards closed and sending on queue, so that Close never races a send.
	mu     sync.RWMutex
	closed bool
	queue  chan *createOp
	done   chan struct{} // closed when the writer has stopped

	stopCompact context.CancelFunc
	compactDone chan struct{}

	meta   metaRecord             // owned by the writer goroutine after Open
	scopes map[string]ScopeCounts // owned by the writer goroutine after Open

	countsMu  sync.Mutex
	counts    Counts                 // as of the last commit
	keyCounts KeyCounts              // as of the last commit
	scopeSnap map[string]ScopeCounts // as of the last commit
}

// createOp is one call waiting for the writer: a create call, a delete, or
// one chunk of compaction.
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

	// del, when set, makes this op a delete; delDone answers it.
	del     *DeleteRequest
	delDone func(DeleteResponse, error)
	// maint, when set, makes this op one chunk of compaction; maintDone
	// answers it with how much it removed and whether more is due.
	maint     bool
	maintDone func(CompactResult, error)
}

// CompactResult says what one compaction removed: keys whose every
// approval has expired (plus allowance and margin), and request and create
// records past the records retention. More is true when a chunk was full.
type CompactResult struct {
	KeysCompacted  int
	RecordsRetired int
	More           bool
}

// ErrDirInUse means that another process has the store's directory open.
var ErrDirInUse = errors.New("provider: data directory in use")

// Errors of a delete.
var (
	// ErrUnknownTask means that no task exists under the key or task id
	// given (never created, or its key was compacted).
	ErrUnknownTask = errors.New("provider: no such task")
	// ErrTaskDeleted means that the task was already deleted.
	ErrTaskDeleted = errors.New("provider: task already deleted")
)

// Open opens (or creates) the store in dir. A store in the layout before
// scopes is migrated first: its keys land in scope "default".
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
	if opts.RecordsRetention < 0 {
		return nil, fmt.Errorf("%w: records retention %v is negative (0 keeps records forever)", ErrInvalidRequest, opts.RecordsRetention)
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
	if err == nil && found && meta.Format == metaFormatUnscoped {
		meta, err = migrateUnscoped(db, meta, log)
	}
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
	scopes, err := loadScopes(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{
		db:          db,
		id:          meta.StoreID,
		clock:       opts.Clock,
		log:         log,
		unsafe:      opts.UnsafeCreateEveryCall,
		allowance:   orDefault(opts.KeyClockAllowance, DefaultKeyClockAllowance),
		margin:      orDefault(opts.KeyMargin, DefaultKeyMargin),
		retention:   opts.RecordsRetention,
		chunk:       opts.CompactChunk,
		queue:       make(chan *createOp, queueLen),
		done:        make(chan struct{}),
		compactDone: make(chan struct{}),
		meta:        meta,
		scopes:      scopes,
		counts:      meta.counts(),
		keyCounts:   meta.keys(),
		scopeSnap:   maps.Clone(scopes),
	}
	if s.chunk <= 0 {
		s.chunk = DefaultCompactChunk
	}
	if s.unsafe {
		log.Error("UNSAFE MODE: every create call creates a new task, even for a known intent id; for tests of the audit only",
			"option", "UnsafeCreateEveryCall")
	}
	log.Info("store opened", "dir", dir, "store_id", meta.StoreID,
		"requests_received", meta.RequestsReceived,
		"creates_executed", meta.CreatesExecuted,
		"tasks_existing", meta.TasksExisting,
		"keys_live", meta.KeysLive, "keys_compacted", meta.KeysCompacted,
		"key_clock_allowance", s.allowance, "key_margin", s.margin, "records_retention", s.retention)
	go s.run()
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCompact = cancel
	every := orDefault(opts.CompactEvery, DefaultCompactEvery)
	if every > 0 {
		go s.compactLoop(ctx, every)
	} else {
		close(s.compactDone)
	}
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
	if m.Format != metaFormat && m.Format != metaFormatUnscoped {
		return metaRecord{}, false, fmt.Errorf("load counters: layout version %d, want %d: %w", m.Format, metaFormat, ErrCorrupt)
	}
	return m, true, nil
}

// migrateChunk bounds the keys rewritten in one batch of a migration.
const migrateChunk = 10000

// migrateUnscoped moves a store of layout version 1 (keys by intent id
// alone) into version 2: every intent record, intent order entry and index
// entry is rewritten into scope "default", the counters of scope "default"
// are the totals, and the meta record says version 2 last. Each key is
// recognised by its form (an old one names no scope, so holds no 0x00
// before its end), so a migration cut short by a crash is finished at the
// next Open. Request, create and task records keep their values: a record
// that names no scope is in "default" when read.
func migrateUnscoped(db *pebble.DB, m metaRecord, log *slog.Logger) (metaRecord, error) {
	log.Info("migrating the store to the layout with scopes: its keys land in scope \"default\"")
	var live int64
	b := db.NewBatch()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		err := b.Commit(pebble.Sync)
		_ = b.Close()
		b = db.NewBatch()
		n = 0
		return err
	}
	defer func() { _ = b.Close() }()
	for _, prefix := range []byte{prefixIntent, prefixIntentOrder, prefixIndex} {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
		if err != nil {
			return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			key := append([]byte(nil), it.Key()...)
			val, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
			}
			var newKey, newVal []byte
			switch prefix {
			case prefixIntent:
				if bytes.IndexByte(key[1:], 0) >= 0 {
					live++
					continue // already moved
				}
				var fr FirstResult
				if err := json.Unmarshal(val, &fr); err != nil {
					_ = it.Close()
					return metaRecord{}, fmt.Errorf("provider: migrating intent %q: %w: %v", key[1:], ErrCorrupt, err)
				}
				fr.Scope = DefaultScope
				newKey = intentKey(fr.Scope, string(key[1:]))
				if newVal, err = json.Marshal(fr); err != nil {
					_ = it.Close()
					return metaRecord{}, err
				}
				live++
			case prefixIntentOrder:
				if bytes.IndexByte(val, 0) >= 0 {
					continue
				}
				newKey = key
				newVal = []byte(keyName(DefaultScope, string(val)))
			case prefixIndex:
				// x <id> 0x00 <kind> <seq>: the id part holds a 0x00 only
				// once moved.
				if len(key) < 1+1+1+8 || bytes.IndexByte(key[1:len(key)-10], 0) >= 0 {
					continue
				}
				id := string(key[1 : len(key)-10])
				newKey = binary.BigEndian.AppendUint64(indexPrefix(DefaultScope, id, key[len(key)-9]), binary.BigEndian.Uint64(key[len(key)-8:]))
				newVal = nil
			}
			if !bytes.Equal(newKey, key) {
				if err := b.Delete(key, nil); err != nil {
					_ = it.Close()
					return metaRecord{}, err
				}
			}
			if err := b.Set(newKey, append([]byte(nil), newVal...), nil); err != nil {
				_ = it.Close()
				return metaRecord{}, err
			}
			if n++; n >= migrateChunk {
				if err := flush(); err != nil {
					_ = it.Close()
					return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
				}
			}
		}
		if err := it.Close(); err != nil {
			return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
		}
	}
	m.Format = metaFormat
	m.KeysLive = live
	sc := ScopeCounts{Scope: DefaultScope, Counts: m.counts(), KeysLive: live}
	val, err := json.Marshal(sc)
	if err == nil {
		err = b.Set(scopeKey(sc.Scope), val, nil)
	}
	if err == nil {
		val, err = json.Marshal(m)
	}
	if err == nil {
		err = b.Set([]byte{prefixMeta}, val, nil)
	}
	n++
	if err == nil {
		err = flush()
	}
	if err != nil {
		return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
	}
	log.Info("store migrated to the layout with scopes", "keys", live, "scope", DefaultScope)
	return m, nil
}

// loadScopes reads every scope's counters.
func loadScopes(db *pebble.DB) (map[string]ScopeCounts, error) {
	out := make(map[string]ScopeCounts)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixScope}, UpperBound: []byte{prefixScope + 1}})
	if err != nil {
		return nil, fmt.Errorf("load scope counters: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		var sc ScopeCounts
		val, err := it.ValueAndErr()
		if err == nil {
			err = json.Unmarshal(val, &sc)
		}
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("load scope counters %q: %w: %v", it.Key(), ErrCorrupt, err)
		}
		out[sc.Scope] = sc
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("load scope counters: %w", err)
	}
	return out, nil
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

// Close stops the background compaction, stops accepting calls, lets the
// writer finish the calls it has accepted, and closes the database.
func (s *Store) Close() error {
	s.stopCompact()
	<-s.compactDone
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

// snapshot returns the counters, the keys' figures and the scopes'
// counters as of one commit.
func (s *Store) snapshot() (Counts, KeyCounts, []ScopeCounts) {
	s.countsMu.Lock()
	defer s.countsMu.Unlock()
	out := make([]ScopeCounts, 0, len(s.scopeSnap))
	for _, name := range slices.Sorted(maps.Keys(s.scopeSnap)) {
		out = append(out, s.scopeSnap[name])
	}
	return s.counts, s.keyCounts, out
}

// lifetime says how long the store keeps keys and records.
func (s *Store) lifetime() *Lifetime {
	return &Lifetime{KeyClockAllowance: s.allowance.String(), KeyMargin: s.margin.String(), RecordsRetention: s.retention.String()}
}

// KeyStats returns the figures of the keys and the counters of every scope
// (in scope order) as of the last commit.
func (s *Store) KeyStats() (KeyCounts, []ScopeCounts) {
	_, keys, scopes := s.snapshot()
	return keys, scopes
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

// Delete deletes one task the way its owner deletes it in their list:
// tasks existing goes down by one (in total and in its scope), a delete
// record is kept, the task record is removed, and the key stays, marked
// deleted, so that a resend of its approval is replayed and creates
// nothing. An unknown task is ErrUnknownTask, one already deleted
// ErrTaskDeleted; either changes nothing. It goes through the writer, so it
// is ordered with creates.
func (s *Store) Delete(ctx context.Context, req DeleteRequest) (DeleteResponse, error) {
	return s.deleteIf(ctx, req, nil)
}

// deleteIf is Delete, asking mayCommit (when set) just before the writer
// decides it, as for a create.
func (s *Store) deleteIf(ctx context.Context, req DeleteRequest, mayCommit func() error) (DeleteResponse, error) {
	req, err := checkDelete(req)
	if err != nil {
		return DeleteResponse{}, err
	}
	type result struct {
		resp DeleteResponse
		err  error
	}
	ch := make(chan result, 1)
	if err := s.submit(&createOp{del: &req, mayCommit: mayCommit, delDone: func(resp DeleteResponse, err error) { ch <- result{resp, err} }}); err != nil {
		return DeleteResponse{}, err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return DeleteResponse{}, fmt.Errorf("delete: %w", ctx.Err())
	}
}

// Compact removes, in chunks of the writer, every key whose keep_until has
// passed and every request and create record past the records retention,
// as of the store's clock. Tasks are never removed. It returns the totals;
// the background compaction calls it every CompactEvery.
func (s *Store) Compact(ctx context.Context) (CompactResult, error) {
	var total CompactResult
	for {
		type result struct {
			r   CompactResult
			err error
		}
		ch := make(chan result, 1)
		if err := s.submit(&createOp{maint: true, maintDone: func(r CompactResult, err error) { ch <- result{r, err} }}); err != nil {
			return total, err
		}
		var r result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return total, fmt.Errorf("compact: %w", ctx.Err())
		}
		if r.err != nil {
			return total, fmt.Errorf("compact: %w", r.err)
		}
		total.KeysCompacted += r.r.KeysCompacted
		total.RecordsRetired += r.r.RecordsRetired
		if !r.r.More {
			return total, nil
		}
	}
}

// compactLoop runs Compact every interval until ctx ends.
func (s *Store) compactLoop(ctx context.Context, every time.Duration) {
	defer close(s.compactDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := s.Compact(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed):
			s.log.Error("compaction failed; retried at the next interval", "err", err)
		case r.KeysCompacted > 0 || r.RecordsRetired > 0:
			s.log.Info("compacted", "keys_compacted", r.KeysCompacted, "records_retired", r.RecordsRetired)
		}
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

// groupState is what the calls of one group have decided so far: the
// batch, the counters, the keys and tasks changed, and the scopes whose
// counters changed.
type groupState struct {
	w       batchWriter
	m       metaRecord
	decided map[string]*FirstResult // by keyName; nil = compacted in this group
	tasks   map[uint64]*TaskRecord  // by task number; nil = deleted in this group
	scopes  map[string]*ScopeCounts // changed in this group
	base    map[string]ScopeCounts
	// compacted is set once a chunk of compaction ran in this group: a
	// second one waits for the next group (it reads committed state).
	compacted bool
}

func newGroup(b *pebble.Batch, m metaRecord, base map[string]ScopeCounts) *groupState {
	return &groupState{w: batchWriter{b: b}, m: m, decided: make(map[string]*FirstResult),
		tasks: make(map[uint64]*TaskRecord), scopes: make(map[string]*ScopeCounts), base: base}
}

// finish writes the changed scopes' counters and the meta record into the
// batch and returns the first error of the group's writes.
func (g *groupState) finish() error {
	for name, sc := range g.scopes {
		g.w.putJSON(scopeKey(name), sc)
	}
	g.w.putJSON([]byte{prefixMeta}, g.m)
	return g.w.err
}

// scope returns the group's copy of one scope's counters.
func (g *groupState) scope(name string) *ScopeCounts {
	if sc, ok := g.scopes[name]; ok {
		return sc
	}
	sc := g.base[name]
	sc.Scope = name
	g.scopes[name] = &sc
	return &sc
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
	dels := make([]DeleteResponse, len(group))
	maint := make([]CompactResult, len(group))
	errs := make([]error, len(group))
	b := s.db.NewBatch()
	defer b.Close()
	g := newGroup(b, s.meta, s.scopes)
	included := 0
	for i, op := range group {
		var err error
		if op.mayCommit != nil {
			if err = op.mayCommit(); err != nil {
				errs[i] = err
				continue
			}
		}
		switch {
		case op.maint:
			maint[i], err = s.compactChunk(g)
		case op.del != nil:
			dels[i], err = s.applyDelete(g, *op.del)
		default:
			if op.refused != nil {
				resps[i] = s.decide(g, op, FirstResult{}, false)
				break
			}
			first, found, lerr := s.lookupIntent(g, op.req.Scope, op.req.IntentID)
			if lerr != nil {
				err = lerr
				break
			}
			resps[i] = s.decide(g, op, first, found)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		included++
	}
	var err error
	if included > 0 {
		err = g.finish()
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		if err != nil {
			err = fmt.Errorf("commit %d calls: %w", included, err)
			s.log.Error("commit refused; no call of the group was applied", "calls", included, "err", err)
		} else {
			s.meta = g.m
			s.countsMu.Lock()
			s.counts = g.m.counts()
			s.keyCounts = g.m.keys()
			for name, sc := range g.scopes {
				s.scopes[name] = *sc
				s.scopeSnap[name] = *sc
			}
			s.countsMu.Unlock()
		}
	}
	for i, op := range group {
		e := errs[i]
		if e == nil {
			e = err
		}
		switch {
		case op.maint:
			op.maintDone(maint[i], e)
		case op.del != nil:
			op.delDone(dels[i], e)
		case e != nil:
			op.done(CreateResponse{}, e)
		case op.refused != nil:
			op.done(resps[i], &RefusedError{Refusal: *op.refused, RequestSeq: resps[i].RequestSeq})
		default:
			op.done(resps[i], nil)
		}
	}
}

// lookupIntent finds the first result of a key: decided earlier in this
// group, or committed before.
func (s *Store) lookupIntent(g *groupState, scope, id string) (FirstResult, bool, error) {
	if fr, ok := g.decided[keyName(scope, id)]; ok {
		if fr == nil {
			return FirstResult{}, false, nil
		}
		return *fr, true, nil
	}
	var fr FirstResult
	found, err := getJSON(s.db, intentKey(scope, id), &fr)
	if err != nil {
		return FirstResult{}, false, fmt.Errorf("read intent %q in scope %q: %w", id, scope, err)
	}
	return fr, found, nil
}

// lookupTask finds a task record: changed earlier in this group, or
// committed before.
func (s *Store) lookupTask(g *groupState, n uint64) (TaskRecord, bool, error) {
	if tr, ok := g.tasks[n]; ok {
		if tr == nil {
			return TaskRecord{}, false, nil
		}
		return *tr, true, nil
	}
	var tr TaskRecord
	found, err := getJSON(s.db, seqKey(prefixTask, n), &tr)
	if err != nil {
		return TaskRecord{}, false, fmt.Errorf("read task %d: %w", n, err)
	}
	if tr.Scope == "" {
		tr.Scope = DefaultScope
	}
	return tr, found, nil
}

// keepUntil is when a key may be compacted for an approval that expires at
// notAfter (zero = never: the key is kept forever, "").
func (s *Store) keepUntil(notAfter time.Time) time.Time {
	if notAfter.IsZero() {
		return time.Time{}
	}
	return notAfter.Add(s.allowance + s.margin)
}

// parseKeep reads a stored keep_until; "" is forever (zero time).
func parseKeep(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("keep_until %q: %w: %v", v, ErrCorrupt, err)
	}
	return t, nil
}

func formatKeep(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// setIntent writes a key's intent record and keeps its expiry entry in
// step: the old one (at oldKeep) removed, the new one (at fr.KeepUntil)
// added. Zero times have no entry.
func (g *groupState) setIntent(fr FirstResult, oldKeep time.Time) {
	newKeep, _ := parseKeep(fr.KeepUntil)
	if !oldKeep.IsZero() && !oldKeep.Equal(newKeep) {
		g.w.del(expiryKey(oldKeep, fr.Scope, fr.IntentID))
	}
	if !newKeep.IsZero() && !oldKeep.Equal(newKeep) {
		g.w.put(expiryKey(newKeep, fr.Scope, fr.IntentID), nil)
	}
	g.w.putJSON(intentKey(fr.Scope, fr.IntentID), fr)
	cp := fr
	g.decided[keyName(fr.Scope, fr.IntentID)] = &cp
}

// decide applies one call to the group and returns its response.
func (s *Store) decide(g *groupState, op *createOp, first FirstResult, found bool) CreateResponse {
	req := op.req
	m := &g.m
	w := &g.w
	sc := g.scope(req.Scope)
	nowT := s.clock().UTC()
	now := nowT.Format(time.RFC3339Nano)
	m.RequestsReceived++
	sc.RequestsReceived++
	seq := uint64(m.RequestsReceived)
	rec := RequestRecord{
		Seq:           seq,
		Scope:         req.Scope,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		RequestID:     req.RequestID,
		CallRef:       req.CallRef,
		NotAfter:      req.NotAfter,
		ReceivedAt:    now,
		ReplyDropped:  op.dropReply,
	}
	var notAfter time.Time
	if req.NotAfter != "" {
		notAfter, _ = time.Parse(time.RFC3339, req.NotAfter) // validated by checkCreate
	}
	keep := s.keepUntil(notAfter)
	if !found && op.refused == nil && !s.unsafe && !keep.IsZero() && nowT.After(keep) {
		// A new key whose own deadline has passed would be compacted at
		// once: no approval can pass the gate any more by the service's
		// clock, so the call is refused, recorded, and creates nothing
		// (a caller whose clock runs behind by more than the allowance,
		// or a call delayed beyond the margin).
		op.refused = &Refusal{Check: CheckKeyDeadline, Field: "not_after",
			Reason: fmt.Sprintf("the key's deadline passed: not_after %s plus the allowance and margin is %s, before the service's clock (%s); the approval cannot pass the gate any more",
				req.NotAfter, keep.UTC().Format(time.RFC3339), nowT.UTC().Format(time.RFC3339))}
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
		sc.CreatesExecuted++
		sc.TasksExisting++
		createSeq := uint64(m.CreatesExecuted)
		taskSeq := m.LastTaskNumber
		taskID := FormatTaskID(taskSeq)
		fr := FirstResult{
			Scope:         req.Scope,
			IntentID:      req.IntentID,
			RequestDigest: req.RequestDigest,
			RequestID:     req.RequestID,
			TaskID:        taskID,
			CreatedAt:     now,
			RequestSeq:    seq,
			KeepUntil:     formatKeep(keep),
		}
		w.putJSON(seqKey(prefixCreate, createSeq), CreateRecord{
			Seq:           createSeq,
			Scope:         req.Scope,
			IntentID:      req.IntentID,
			RequestDigest: req.RequestDigest,
			TaskID:        taskID,
			RequestSeq:    seq,
			CreatedAt:     now,
		})
		w.put(indexKey(req.Scope, req.IntentID, prefixCreate, createSeq), nil)
		tr := TaskRecord{
			Seq:       taskSeq,
			TaskID:    taskID,
			Scope:     req.Scope,
			IntentID:  req.IntentID,
			Task:      req.Task,
			CreatedAt: now,
		}
		w.putJSON(seqKey(prefixTask, taskSeq), tr)
		g.tasks[taskSeq] = &tr
		w.put(indexKey(req.Scope, req.IntentID, prefixTask, taskSeq), nil)
		if !found {
			// The first result is written once; later calls only extend
			// its keep_until and mark its task deleted.
			g.setIntent(fr, time.Time{})
			w.put(seqKey(prefixIntentOrder, seq), []byte(keyName(req.Scope, req.IntentID)))
			m.KeysLive++
			sc.KeysLive++
		} else {
			s.extend(g, first, keep, notAfter.IsZero())
		}
		rec.Outcome, rec.TaskID = OutcomeCreated, taskID
		resp = CreateResponse{Outcome: OutcomeCreated, TaskID: taskID, First: fr}
	default:
		first = s.extend(g, first, keep, notAfter.IsZero())
		rec.Outcome, rec.TaskID = OutcomeConflict, first.TaskID
		if first.RequestDigest == req.RequestDigest {
			rec.Outcome = OutcomeReplayed
		}
		rec.TaskDeleted = first.TaskDeleted
		resp = CreateResponse{Outcome: rec.Outcome, TaskID: first.TaskID, First: first, TaskDeleted: first.TaskDeleted}
	}
	w.putJSON(seqKey(prefixRequest, seq), rec)
	w.put(indexKey(req.Scope, req.IntentID, prefixRequest, seq), nil)
	resp.Counts = m.counts()
	resp.RequestSeq = seq
	resp.StoreID = m.StoreID
	return resp
}

// extend makes a key's keep_until the later of its own and keep (forever
// when the approval never expires, or the key is already kept forever),
// and returns the key's record as it is now.
func (s *Store) extend(g *groupState, first FirstResult, keep time.Time, forever bool) FirstResult {
	old, err := parseKeep(first.KeepUntil)
	if err != nil || old.IsZero() {
		return first // kept forever already (or unreadable: kept)
	}
	switch {
	case forever:
		first.KeepUntil = ""
	case keep.After(old):
		first.KeepUntil = formatKeep(keep)
	default:
		return first
	}
	g.setIntent(first, old)
	return first
}

// applyDelete deletes one task (see Delete).
func (s *Store) applyDelete(g *groupState, req DeleteRequest) (DeleteResponse, error) {
	var n uint64
	if req.TaskID != "" {
		n, _ = parseTaskID(req.TaskID) // validated by checkDelete
	} else {
		fr, found, err := s.lookupIntent(g, req.Scope, req.IntentID)
		if err != nil {
			return DeleteResponse{}, err
		}
		if !found {
			return DeleteResponse{}, fmt.Errorf("%w: no key (scope %q, intent %q): never created, or compacted after its approvals expired", ErrUnknownTask, req.Scope, req.IntentID)
		}
		if fr.TaskDeleted {
			return DeleteResponse{}, fmt.Errorf("%w: %s (scope %q, intent %q) was deleted at %s", ErrTaskDeleted, fr.TaskID, req.Scope, req.IntentID, fr.DeletedAt)
		}
		n, _ = parseTaskID(fr.TaskID)
	}
	tr, found, err := s.lookupTask(g, n)
	if err != nil {
		return DeleteResponse{}, err
	}
	if !found {
		if n >= 1 && n <= g.m.LastTaskNumber {
			return DeleteResponse{}, fmt.Errorf("%w: %s no longer exists", ErrTaskDeleted, FormatTaskID(n))
		}
		return DeleteResponse{}, fmt.Errorf("%w: %s was never created", ErrUnknownTask, FormatTaskID(n))
	}
	now := s.clock().UTC().Format(time.RFC3339Nano)
	m := &g.m
	sc := g.scope(tr.Scope)
	m.TasksExisting--
	sc.TasksExisting--
	m.DeletesExecuted++
	sc.TasksDeleted++
	seq := uint64(m.DeletesExecuted)
	rec := DeleteRecord{Seq: seq, Scope: tr.Scope, IntentID: tr.IntentID, TaskID: tr.TaskID, DeletedAt: now}
	g.w.del(seqKey(prefixTask, n))
	g.w.del(indexKey(tr.Scope, tr.IntentID, prefixTask, n))
	g.tasks[n] = nil
	g.w.putJSON(seqKey(prefixDelete, seq), rec)
	g.w.put(indexKey(tr.Scope, tr.IntentID, prefixDelete, seq), nil)
	fr, found, err := s.lookupIntent(g, tr.Scope, tr.IntentID)
	if err != nil {
		return DeleteResponse{}, err
	}
	if found && fr.TaskID == tr.TaskID {
		old, _ := parseKeep(fr.KeepUntil)
		fr.TaskDeleted, fr.DeletedAt = true, now
		g.setIntent(fr, old)
	}
	return DeleteResponse{Deleted: rec, Counts: m.counts()}, nil
}

// compactChunk removes up to one chunk of expired keys and one chunk of
// request and create records past their retention, as of the clock now.
// Each expiry entry is checked against its key as this group has it, so
// a replay decided earlier in the group that extended the key keeps it.
func (s *Store) compactChunk(g *groupState) (CompactResult, error) {
	var r CompactResult
	if g.compacted {
		return CompactResult{More: true}, nil
	}
	g.compacted = true
	now := s.clock()
	upper := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(max(now.UnixNano(), 0)))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: upper})
	if err != nil {
		return r, err
	}
	type entry struct {
		key       []byte
		scope, id string
		at        time.Time
	}
	var due []entry
	for ok := it.First(); ok; ok = it.Next() {
		if len(due) == s.chunk {
			r.More = true
			break
		}
		k := append([]byte(nil), it.Key()...)
		scope, id, at, perr := parseExpiryKey(k)
		if perr != nil {
			_ = it.Close()
			return r, perr
		}
		due = append(due, entry{k, scope, id, at})
	}
	if err := it.Close(); err != nil {
		return r, err
	}
	for _, e := range due {
		g.w.del(e.key)
		fr, found, err := s.lookupIntent(g, e.scope, e.id)
		if err != nil {
			return r, err
		}
		if !found {
			continue
		}
		keep, err := parseKeep(fr.KeepUntil)
		if err != nil {
			return r, err
		}
		if keep.IsZero() || !keep.Before(now) {
			// Extended (or made forever) since this entry was written:
			// its own entry stays.
			if keep.Equal(e.at) {
				g.w.put(e.key, nil)
			}
			continue
		}
		g.w.del(intentKey(e.scope, e.id))
		g.w.del(seqKey(prefixIntentOrder, fr.RequestSeq))
		g.decided[keyName(e.scope, e.id)] = nil
		sc := g.scope(e.scope)
		g.m.KeysLive--
		g.m.KeysCompacted++
		sc.KeysLive--
		sc.KeysCompacted++
		r.KeysCompacted++
	}
	if s.retention > 0 {
		cutoff := now.Add(-s.retention)
		for _, kind := range []byte{prefixRequest, prefixCreate} {
			n, more, err := s.retire(g, kind, cutoff)
			if err != nil {
				return r, err
			}
			r.RecordsRetired += n
			r.More = r.More || more
		}
	}
	return r, nil
}

// retire removes up to one chunk of the oldest records of kind (requests
// or creates) made before cutoff, with their index entries.
func (s *Store) retire(g *groupState, kind byte, cutoff time.Time) (int, bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = it.Close() }()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n == s.chunk {
			return n, true, nil
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return n, false, err
		}
		var rec struct {
			Scope      string `json:"scope"`
			IntentID   string `json:"intent_id"`
			ReceivedAt string `json:"received_at"`
			CreatedAt  string `json:"created_at"`
		}
		if err := json.Unmarshal(val, &rec); err != nil {
			return n, false, fmt.Errorf("record %q: %w: %v", it.Key(), ErrCorrupt, err)
		}
		at := rec.ReceivedAt
		if kind == prefixCreate {
			at = rec.CreatedAt
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return n, false, fmt.Errorf("record %q: %w: %v", it.Key(), ErrCorrupt, err)
		}
		if !t.Before(cutoff) {
			return n, false, nil
		}
		if rec.Scope == "" {
			rec.Scope = DefaultScope
		}
		key := it.Key()
		seq := binary.BigEndian.Uint64(key[1:])
		g.w.del(append([]byte(nil), key...))
		g.w.del(indexKey(rec.Scope, rec.IntentID, kind, seq))
		g.m.RecordsRetired++
		n++
	}
	return n, false, nil
}

// FormatTaskID renders task number n as fake-task-0001, ..., fake-task-9999,
// fake-task-10000, ...
func FormatTaskID(n uint64) string {
	return fmt.Sprintf("fake-task-%04d", n)
}

// Records returns one page of one kind of record, by sequence, for one
// scope, or for one key.
func (s *Store) Records(req RecordsRequest) (RecordsResponse, error) {
	limit, err := validateRecords(&req)
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
	case RecordDeletes:
		kind = prefixDelete
	}
	// add decodes one record and keeps it when it is in the scope asked
	// for (records written before scopes are in "default").
	add := func(seq uint64, val []byte) (bool, error) {
		var err error
		scopeOf := func(sc *string) bool {
			if *sc == "" {
				*sc = DefaultScope
			}
			return req.Scope == "" || *sc == req.Scope
		}
		kept := false
		switch kind {
		case prefixRequest:
			var r RequestRecord
			if err = json.Unmarshal(val, &r); err == nil && scopeOf(&r.Scope) {
				resp.Requests, kept = append(resp.Requests, r), true
			}
		case prefixCreate:
			var r CreateRecord
			if err = json.Unmarshal(val, &r); err == nil && scopeOf(&r.Scope) {
				resp.Creates, kept = append(resp.Creates, r), true
			}
		case prefixTask:
			var r TaskRecord
			if err = json.Unmarshal(val, &r); err == nil && scopeOf(&r.Scope) {
				resp.Tasks, kept = append(resp.Tasks, r), true
			}
		case prefixDelete:
			var r DeleteRecord
			if err = json.Unmarshal(val, &r); err == nil && scopeOf(&r.Scope) {
				resp.Deletes, kept = append(resp.Deletes, r), true
			}
		}
		if err != nil {
			return false, fmt.Errorf("record %c %d: %w: %v", kind, seq, ErrCorrupt, err)
		}
		return kept, nil
	}
	if req.IntentID == "" {
		next, err := s.page(seqPrefix(kind), req.AfterSeq, limit, add)
		resp.NextSeq = next
		return err
	}
	// One key: walk its index and read each record by key.
	next, err := s.page(indexPrefix(req.Scope, req.IntentID, kind), req.AfterSeq, limit, func(seq uint64, _ []byte) (bool, error) {
		val, ok, err := getRaw(s.db, seqKey(kind, seq))
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("index names record %c %d that does not exist: %w", kind, seq, ErrCorrupt)
		}
		return add(seq, val)
	})
	resp.NextSeq = next
	return err
}

func (s *Store) intentRecords(req RecordsRequest, limit int, resp *RecordsResponse) error {
	if req.IntentID != "" {
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(req.Scope, req.IntentID), &fr)
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
	next, err := s.page(seqPrefix(prefixIntentOrder), req.AfterSeq, limit, func(seq uint64, val []byte) (bool, error) {
		scope, id, ok := splitKeyName(string(val))
		if !ok {
			return false, fmt.Errorf("intent order %d names %q, not a key: %w", seq, val, ErrCorrupt)
		}
		if req.Scope != "" && scope != req.Scope {
			return false, nil
		}
		var fr FirstResult
		found, err := getJSON(s.db, intentKey(scope, id), &fr)
		if err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("intent %q in scope %q listed at %d does not exist: %w", id, scope, seq, ErrCorrupt)
		}
		resp.Intents = append(resp.Intents, fr)
		return true, nil
	})
	resp.NextSeq = next
	return err
}

// page calls fn for keys prefix+<seq> with seq > after, in order, until fn
// has kept limit records (fn says whether it kept one). It returns the
// sequence to continue after, or 0 when the page is the last.
func (s *Store) page(prefix []byte, after uint64, limit int, fn func(seq uint64, val []byte) (bool, error)) (uint64, error) {
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
		kept := false
		if err == nil {
			kept, err = fn(seq, val)
		}
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		last = seq
		if kept {
			n++
		}
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return 0, nil
}

// batchWriter collects puts and deletes and keeps the first error.
type batchWriter struct {
	b   *pebble.Batch
	err error
}

func (w *batchWriter) put(key, val []byte) {
	if w.err == nil {
		w.err = w.b.Set(key, val, nil)
	}
}

func (w *batchWriter) del(key []byte) {
	if w.err == nil {
		w.err = w.b.Delete(key, nil)
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

// keyName is a key (scope, intent id) as one string: <scope> 0x00 <intent>.
func keyName(scope, id string) string { return scope + "\x00" + id }

// splitKeyName is the inverse of keyName.
func splitKeyName(k string) (scope, id string, ok bool) {
	return strings.Cut(k, "\x00")
}

func intentKey(scope, id string) []byte {
	return append([]byte{prefixIntent}, keyName(scope, id)...)
}

func scopeKey(scope string) []byte {
	return append([]byte{prefixScope}, scope...)
}

func indexPrefix(scope, id string, kind byte) []byte {
	k := make([]byte, 0, len(scope)+len(id)+4)
	k = append(k, prefixIndex)
	k = append(k, keyName(scope, id)...)
	return append(k, 0, kind)
}

func indexKey(scope, id string, kind byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(scope, id, kind), seq)
}

// expiryKey is the expiry index entry of a key kept until at.
func expiryKey(at time.Time, scope, id string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(max(at.UnixNano(), 0)))
	return append(k, keyName(scope, id)...)
}

func parseExpiryKey(k []byte) (scope, id string, at time.Time, err error) {
	if len(k) < 1+8+2 {
		return "", "", time.Time{}, fmt.Errorf("expiry entry %q: %w", k, ErrCorrupt)
	}
	at = time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))).UTC()
	scope, id, ok := splitKeyName(string(k[9:]))
	if !ok {
		return "", "", time.Time{}, fmt.Errorf("expiry entry %q: %w", k, ErrCorrupt)
	}
	return scope, id, at, nil
}

// parseTaskID reads the number of a task id made by FormatTaskID.
func parseTaskID(id string) (uint64, bool) {
	digits, ok := strings.CutPrefix(id, "fake-task-")
	if !ok || len(digits) < 4 || (len(digits) > 4 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 || FormatTaskID(n) != id {
		return 0, false
	}
	return n, true
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
