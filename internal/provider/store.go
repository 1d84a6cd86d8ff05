package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

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
	// NewReason says why a new, empty store is meant to be made here (the
	// demo's: each of its stores starts empty, on purpose). A new store is
	// then logged at INFO with the reason, instead of the warning for a
	// deployment whose store may have gone missing.
	NewReason string
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
	queue  chan writerOp
	done   chan struct{} // closed when the writer has stopped

	stopCompact context.CancelFunc
	compactDone chan struct{}

	meta   metaRecord             // owned by the writer goroutine after Open
	scopes map[string]ScopeCounts // owned by the writer goroutine after Open

	countsMu  sync.Mutex
	counts    Counts                 // as of the last commit
	keyCounts KeyCounts              // as of the last commit
	scopeSnap map[string]ScopeCounts // as of the last commit

	// intents filters the intent reads of the writer (intentFilter); nil
	// reads every one.
	intents *intentFilter
}

// ErrDirInUse means that another process has the store's directory open.
var ErrDirInUse = errors.New("provider: data directory in use")

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
	db, meta, scopes, err := openDB(dir, opts.FS, log, opts.NewReason)
	if err != nil {
		return nil, err
	}
	intents, err := buildIntentFilter(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %q: %w", dir, err)
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
		queue:       make(chan writerOp, queueLen),
		done:        make(chan struct{}),
		compactDone: make(chan struct{}),
		meta:        meta,
		scopes:      scopes,
		counts:      meta.counts(),
		keyCounts:   meta.keys(),
		scopeSnap:   maps.Clone(scopes),
		intents:     intents,
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

// openDB opens the Pebble database in dir and reads its meta record and
// scopes' counters, migrating a store of layout version 1 first and giving
// a store without an id its id. When it fails, the database is closed.
func openDB(dir string, fs vfs.FS, log *slog.Logger, newReason string) (*pebble.DB, metaRecord, map[string]ScopeCounts, error) {
	db, err := pebble.Open(dir, pebbleOptions(fs, log))
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, metaRecord{}, nil, fmt.Errorf("%w: %q: another process holds it (one service per data directory); stop it, or give this one another data directory: %w", ErrDirInUse, dir, err)
		}
		return nil, metaRecord{}, nil, fmt.Errorf("open pebble in %q: %w", dir, err)
	}
	meta, found, err := loadMeta(db)
	if err == nil && found && meta.Format == metaFormatUnscoped {
		meta, err = migrateUnscoped(db, meta, log)
	}
	if err == nil && meta.StoreID == "" {
		meta, err = giveID(db, dir, meta, found, log, newReason)
	}
	var scopes map[string]ScopeCounts
	if err == nil {
		scopes, err = loadScopes(db)
	}
	if err != nil {
		_ = db.Close()
		return nil, metaRecord{}, nil, err
	}
	return db, meta, scopes, nil
}

// giveID gives a store without an id (a new one, or one made before ids
// existed) its id, durable before anyone can see it in a reply. A new
// store is warned about, unless newReason says why one is meant.
func giveID(db *pebble.DB, dir string, meta metaRecord, found bool, log *slog.Logger, newReason string) (metaRecord, error) {
	var err error
	if meta.StoreID, err = newStoreID(); err == nil {
		err = putMeta(db, meta)
	}
	if err != nil {
		return metaRecord{}, fmt.Errorf("provider: give the store in %q an id: %w", dir, err)
	}
	abs, aerr := filepath.Abs(dir)
	if aerr != nil {
		abs = dir
	}
	switch {
	case !found && newReason != "":
		log.Info("new store, as meant: "+newReason, "dir", abs, "store_id", meta.StoreID)
	case !found:
		log.Warn("new store: no task, request or counter exists here yet; if the service ran before, check the data directory",
			"dir", abs, "store_id", meta.StoreID)
	default:
		log.Info("store had no id; gave it one", "dir", abs, "store_id", meta.StoreID)
	}
	return meta, nil
}

// blockCacheBytes sizes Pebble's block cache. A create call reads its
// intent id (unless the intent filter, intentFilter, rules it out), and
// Pebble reads each file's index and bloom filter blocks through this
// cache: once a store's data outgrows the cache, those blocks are evicted
// and read again from the files, and a lookup cost grew from about 6 to
// 17 µs over six drains of 30,000 approvals with 64 MiB. 256 MiB
// holds the index and filter blocks of a store of several million intents.
// The service's memory stays bounded by it plus two memtables (MemTableSize)
// and a small Go heap, of which the intent filter takes about 2.5 bytes per
// stored key (2.5 MB per million).
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
	switch m.Format {
	case metaFormat, metaFormatUnscoped:
	case metaFormatIndexWritten:
		// Read as it is; the next commit says version 3.
		m.Format = metaFormat
	default:
		return metaRecord{}, false, fmt.Errorf("load counters: layout version %d, want %d: %w", m.Format, metaFormat, ErrCorrupt)
	}
	return m, true, nil
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
