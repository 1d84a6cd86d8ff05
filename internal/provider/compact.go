package provider

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// CompactResult says what one compaction removed: keys whose every
// approval has expired (plus allowance and margin), and request and create
// records past the records retention. More is true when a chunk was full.
type CompactResult struct {
	KeysCompacted  int
	RecordsRetired int
	More           bool
}

// compactCall is one chunk of compaction waiting for the writer; it is
// answered with how much it removed and whether more is due.
type compactCall struct {
	done   func(CompactResult, error)
	result CompactResult // decided by apply
}

func (c *compactCall) apply(s *Store, g *groupState) error {
	var err error
	c.result, err = s.compactChunk(g)
	return err
}

func (c *compactCall) answer(err error) { c.done(c.result, err) }

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
		if err := s.submit(&compactCall{done: func(r CompactResult, err error) { ch <- result{r, err} }}); err != nil {
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
	due, more, err := s.dueExpiries(now)
	if err != nil {
		return r, err
	}
	r.More = more
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
		if err := s.writeImplied(g, fr); err != nil {
			return r, err
		}
		g.w.del(intentKey(e.scope, e.id))
		if g.intents != nil {
			g.intents.removedOne()
		}
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

// expiryEntry is one entry of the expiry index.
type expiryEntry struct {
	key       []byte
	scope, id string
	at        time.Time
}

// dueExpiries reads, in order, up to one chunk of the expiry entries due
// by now; more says that others are due after them.
func (s *Store) dueExpiries(now time.Time) (due []expiryEntry, more bool, err error) {
	upper := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(max(now.UnixNano(), 0)))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if len(due) == s.chunk {
			more = true
			break
		}
		k := append([]byte(nil), it.Key()...)
		scope, id, at, perr := parseExpiryKey(k)
		if perr != nil {
			_ = it.Close()
			return nil, false, perr
		}
		due = append(due, expiryEntry{k, scope, id, at})
	}
	if err := it.Close(); err != nil {
		return nil, false, err
	}
	return due, more, nil
}

// writeImplied writes the index entries that a key's intent record stands
// for (impliedEntry) before compaction removes it, so that its records stay
// listed under the key: its first request's and create's while their
// records are kept, its task's while the task exists.
func (s *Store) writeImplied(g *groupState, fr FirstResult) error {
	for _, kind := range []byte{prefixRequest, prefixCreate, prefixTask} {
		seq := impliedEntry(fr, kind)
		if seq == 0 {
			continue
		}
		if kind != prefixTask {
			_, kept, err := getRaw(s.db, seqKey(kind, seq))
			if err != nil {
				return fmt.Errorf("read record %c %d of intent %q in scope %q: %w", kind, seq, fr.IntentID, fr.Scope, err)
			}
			if !kept {
				continue // retired
			}
		}
		g.w.put(indexKey(fr.Scope, fr.IntentID, kind, seq), nil)
	}
	return nil
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
