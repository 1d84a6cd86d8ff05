package provider

import (
	"fmt"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// intentFilter is a Bloom filter of the keys whose intent record the store
// holds, kept in memory so that a create for a key never seen (most of
// them) skips the Pebble read of its intent record, which seeks the
// memtable's skiplist and every file's filter.
//
// A negative answer must be exact, so every key with an intent record is
// added: all of them when the filter is built (at Open, after any
// migration, and again by the writer between groups), and each one a group
// writes (setIntent), before its commit. A positive answer may be false (a
// key compacted since the build, a group whose commit failed, a collision):
// it only costs the read. The writer alone uses it.
//
// It holds about filterBitsPerKey bits per key of its capacity, which is
// twice the keys it was built with (at least minFilterKeys); it is built
// again once the keys added since exceed its capacity, or once compaction
// has removed half of the keys it was built with, so that its size follows
// the live keys.
type intentFilter struct {
	seed    maphash.Seed
	bits    []uint64
	built   int // keys found when it was built
	added   int // keys added since
	removed int // keys compacted since
}

const (
	filterBitsPerKey = 10
	filterProbes     = 7
	minFilterKeys    = 1 << 16
)

// buildIntentFilter reads every intent key of db into a new filter.
func buildIntentFilter(db *pebble.DB) (*intentFilter, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIntent}, UpperBound: []byte{prefixIntent + 1}})
	if err != nil {
		return nil, fmt.Errorf("build intent filter: %w", err)
	}
	seed := maphash.MakeSeed()
	var sums []uint64
	for ok := it.First(); ok; ok = it.Next() {
		sums = append(sums, maphash.Bytes(seed, it.Key()[1:]))
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("build intent filter: %w", err)
	}
	capacity := max(2*len(sums), minFilterKeys)
	f := &intentFilter{seed: seed, bits: make([]uint64, (capacity*filterBitsPerKey+63)/64), built: len(sums)}
	for _, sum := range sums {
		f.set(sum)
	}
	return f, nil
}

// hash is the hash of the key (scope, id): that of its key name's bytes.
func (f *intentFilter) hash(scope, id string) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteString(scope)
	_ = h.WriteByte(0)
	h.WriteString(id)
	return h.Sum64()
}

// probes are the bit positions of a hash: filterProbes of them, by double
// hashing.
func (f *intentFilter) probes(sum uint64) (pos, step, n uint64) {
	return sum, sum>>32 | sum<<32 | 1, uint64(len(f.bits)) * 64
}

func (f *intentFilter) set(sum uint64) {
	pos, step, n := f.probes(sum)
	for range filterProbes {
		p := pos % n
		f.bits[p/64] |= 1 << (p % 64)
		pos += step
	}
}

// add records that the key (scope, id) has an intent record.
func (f *intentFilter) add(scope, id string) {
	f.set(f.hash(scope, id))
	f.added++
}

// removedOne records that compaction removed a key's intent record.
func (f *intentFilter) removedOne() { f.removed++ }

// mayHold is false only for a key that has no intent record.
func (f *intentFilter) mayHold(scope, id string) bool {
	pos, step, n := f.probes(f.hash(scope, id))
	for range filterProbes {
		p := pos % n
		if f.bits[p/64]&(1<<(p%64)) == 0 {
			return false
		}
		pos += step
	}
	return true
}

// stale says whether the filter should be built again: it is full, or
// compaction removed half of what it was built with.
func (f *intentFilter) stale() bool {
	capacity := len(f.bits) * 64 / filterBitsPerKey
	return f.built+f.added > capacity || (f.removed > minFilterKeys/2 && 2*f.removed > f.built+f.added)
}

// refreshIntentFilter builds the writer's filter again when it is stale,
// between groups (it reads the committed keys). When that fails, the writer
// reads every key from then on.
func (s *Store) refreshIntentFilter() {
	if s.intents == nil || !s.intents.stale() {
		return
	}
	f, err := buildIntentFilter(s.db)
	if err != nil {
		s.log.Error("intent filter not rebuilt; every create reads its key from now on", "err", err)
	}
	s.intents = f
}
