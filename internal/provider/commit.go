package provider

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/sendtwice/sendtwice/internal/queue"
)

// maxGroup bounds the create calls committed in one batch.
const maxGroup = 256

// queueLen is how many create calls may wait for the writer.
const queueLen = 1024

// writerOp is one call waiting for the writer: a create call (createCall),
// a delete (deleteCall) or one chunk of compaction (compactCall). The writer
// applies the calls of a group in arrival order, commits the group, then
// answers each call.
type writerOp interface {
	// apply decides the call into the group's batch and keeps its result;
	// an error leaves the call out of the group (nothing of it is written)
	// and is its answer.
	apply(s *Store, g *groupState) error
	// answer is called exactly once by the writer, after the commit (or
	// its failure): err is the call's own error or else the commit's.
	answer(err error)
}

// permit asks mayCommit, when set, just before a call is decided and
// written; an error leaves the call out of the group and answers it.
func permit(mayCommit func() error) error {
	if mayCommit == nil {
		return nil
	}
	return mayCommit()
}

// submit hands a validated call to the writer. Its answer is called exactly
// once, from the writer goroutine, unless submit returns an error.
func (s *Store) submit(op writerOp) error {
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
	group := make([]writerOp, 0, maxGroup)
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
	// intents is the store's intent filter, told of the intent records
	// the group writes and compacts; nil when there is none.
	intents *intentFilter
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
func (s *Store) commitGroup(group []writerOp) {
	errs := make([]error, len(group))
	s.refreshIntentFilter()
	b := s.db.NewBatch()
	defer b.Close()
	g := newGroup(b, s.meta, s.scopes)
	g.intents = s.intents
	included := 0
	for i, op := range group {
		if errs[i] = op.apply(s, g); errs[i] == nil {
			included++
		}
	}
	var err error
	if included > 0 {
		err = s.commit(b, g, included)
	}
	for i, op := range group {
		e := errs[i]
		if e == nil {
			e = err
		}
		op.answer(e)
	}
}

// commit writes the group's counters into its batch, commits it with
// pebble.Sync and, once it is committed, makes the group's counters the
// store's.
func (s *Store) commit(b *pebble.Batch, g *groupState, included int) error {
	err := g.finish()
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		err = fmt.Errorf("commit %d calls: %w", included, err)
		s.log.Error("commit refused; no call of the group was applied", "calls", included, "err", err)
		return err
	}
	s.meta = g.m
	s.countsMu.Lock()
	defer s.countsMu.Unlock()
	s.counts = g.m.counts()
	s.keyCounts = g.m.keys()
	for name, sc := range g.scopes {
		s.scopes[name] = *sc
		s.scopeSnap[name] = *sc
	}
	return nil
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
	if s.intents != nil && !s.intents.mayHold(scope, id) {
		return FirstResult{}, false, nil
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

// batchWriter collects puts and deletes and keeps the first error.
type batchWriter struct {
	b   *pebble.Batch
	err error
	buf []byte // a record's encoding; the batch copies it
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

// putRecord puts a record that encodes itself (see recordjson.go).
func putRecord[R jsonRecord](w *batchWriter, key []byte, r R) {
	if w.err == nil {
		w.buf = r.appendJSON(w.buf[:0])
		w.err = w.b.Set(key, w.buf, nil)
	}
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
