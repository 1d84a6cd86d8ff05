package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// This file holds two helpers for benchmarks, never used by the service
// itself: a fast loader of a large store, and the storage reference that the
// end-to-end benchmark compares itself with.

// PreloadIntent is the intent id Preload gives its i-th intent.
func PreloadIntent(i int) string { return fmt.Sprintf("stored-intent-%08d", i) }

// preloadRequest is the create call Preload records for one intent: one
// that the service would accept, with its request document.
func preloadRequest(id string) (CreateRequest, error) {
	return NewRequest(id, Task{Title: id})
}

// referenceRequest is the create call whose records PebbleReference writes:
// records of the same size as a call's, without the cost of making a request
// document inside the measured loop.
func referenceRequest(id string) CreateRequest {
	sum := sha256.Sum256([]byte(id))
	return CreateRequest{
		Scope:         DefaultScope,
		IntentID:      id,
		RequestDigest: digestPrefix + hex.EncodeToString(sum[:]),
		RequestID:     "task-request-" + id,
		Task:          Task{Title: id},
	}
}

// Preload writes n created intents (PreloadIntent(0) ... PreloadIntent(n-1):
// all four records, the index and the counters, exactly as n create calls
// would leave them) into the store in dir, which must be new or hold no
// records. It goes through the same code that decides a create call, but in
// large batches without a write-ahead log, then flushes and compacts, so that
// the store looks like one that has been running for a long time. It is for
// benchmarks of a large store; the service never calls it.
func Preload(dir string, n int) error {
	opts := pebbleOptions(nil, discardLogger())
	opts.DisableWAL = true
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return err
	}
	s := &Store{db: db, clock: time.Now, log: discardLogger(), allowance: DefaultKeyClockAllowance, margin: DefaultKeyMargin}
	m, _, err := loadMeta(db)
	if err == nil && m.RequestsReceived != 0 {
		err = fmt.Errorf("provider: preload into %s: the store already holds %d requests", dir, m.RequestsReceived)
	}
	if err == nil && m.StoreID == "" {
		m.StoreID, err = newStoreID()
	}
	if err != nil {
		_ = db.Close()
		return err
	}
	const per = 20_000
	scopes := map[string]ScopeCounts{}
	for lo := 0; lo < n; lo += per {
		b := db.NewBatch()
		g := newGroup(b, m, scopes)
		for i := lo; i < min(lo+per, n); i++ {
			req, err := preloadRequest(PreloadIntent(i))
			if err != nil {
				_ = b.Close()
				_ = db.Close()
				return err
			}
			s.decide(g, &createCall{req: req}, FirstResult{}, false)
		}
		err := g.finish()
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		_ = b.Close()
		if err != nil {
			_ = db.Close()
			return err
		}
		m = g.m
		for name, sc := range g.scopes {
			scopes[name] = *sc
		}
	}
	if err := db.Flush(); err != nil {
		_ = db.Close()
		return err
	}
	// Leave the tree settled, as a long-running store would be, so that a
	// benchmark does not pay for the load's compactions.
	if err := db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// PebbleReference measures the storage alone: n requests' records (the batch
// the service writes for one create call of a new intent: request, create,
// task and intent records, their indexes and the counters), each committed
// as its own batch with pebble.Sync by one of writers goroutines at once,
// in a new Pebble store in dir with the service's options. Pebble groups
// concurrent synced commits into one write-ahead-log sync. It returns the
// time the n commits took.
func PebbleReference(ctx context.Context, dir string, writers, n int) (time.Duration, error) {
	opts := pebbleOptions(nil, discardLogger())
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return 0, err
	}
	s := &Store{db: db, clock: time.Now, log: discardLogger()}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			// Each writer numbers its records in its own range, so that
			// the writers never overwrite one another's keys.
			base := int64(w+1) << 40
			m := metaRecord{Format: metaFormat, RequestsReceived: base, CreatesExecuted: base, TasksExisting: base, LastTaskNumber: uint64(base)}
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				b := db.NewBatch()
				g := newGroup(b, m, map[string]ScopeCounts{})
				s.decide(g, &createCall{req: referenceRequest(fmt.Sprintf("reference-intent-%010d", i))}, FirstResult{}, false)
				err := g.finish()
				m = g.m
				if err == nil {
					err = b.Commit(pebble.Sync)
				}
				_ = b.Close()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if cerr := db.Close(); firstErr == nil {
		firstErr = cerr
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return took, firstErr
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
