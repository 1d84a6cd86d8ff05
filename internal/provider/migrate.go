package provider

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

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
	mb := &migrationBatch{db: db, b: db.NewBatch()}
	defer func() { _ = mb.b.Close() }()
	var live int64
	for _, prefix := range []byte{prefixIntent, prefixIntentOrder, prefixIndex} {
		n, err := mb.moveAll(prefix)
		if err != nil {
			return metaRecord{}, err
		}
		live += n
	}
	m.Format = metaFormat
	m.KeysLive = live
	sc := ScopeCounts{Scope: DefaultScope, Counts: m.counts(), KeysLive: live}
	val, err := json.Marshal(sc)
	if err == nil {
		err = mb.b.Set(scopeKey(sc.Scope), val, nil)
	}
	if err == nil {
		val, err = json.Marshal(m)
	}
	if err == nil {
		err = mb.b.Set([]byte{prefixMeta}, val, nil)
	}
	mb.n++
	if err == nil {
		err = mb.flush()
	}
	if err != nil {
		return metaRecord{}, fmt.Errorf("provider: migrating the store: %w", err)
	}
	log.Info("store migrated to the layout with scopes", "keys", live, "scope", DefaultScope)
	return m, nil
}

// migrationBatch is the batch a migration writes, committed (synced) every
// migrateChunk keys.
type migrationBatch struct {
	db *pebble.DB
	b  *pebble.Batch
	n  int // keys in b
}

// flush commits the batch, if it holds anything, and starts a new one.
func (mb *migrationBatch) flush() error {
	if mb.n == 0 {
		return nil
	}
	err := mb.b.Commit(pebble.Sync)
	_ = mb.b.Close()
	mb.b = mb.db.NewBatch()
	mb.n = 0
	return err
}

// moveAll rewrites every key with this prefix that is still in layout
// version 1 and returns how many intent records (keys) it saw, moved
// before or now.
func (mb *migrationBatch) moveAll(prefix byte) (int64, error) {
	it, err := mb.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return 0, fmt.Errorf("provider: migrating the store: %w", err)
	}
	var live int64
	for ok := it.First(); ok; ok = it.Next() {
		key := append([]byte(nil), it.Key()...)
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("provider: migrating the store: %w", err)
		}
		newKey, newVal, intent, err := migratedEntry(prefix, key, val)
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		if intent {
			live++
		}
		if newKey == nil {
			continue // moved before
		}
		if err := mb.move(key, newKey, newVal); err != nil {
			_ = it.Close()
			return 0, err
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("provider: migrating the store: %w", err)
	}
	return live, nil
}

// move writes newVal under newKey in place of key, flushing every
// migrateChunk keys.
func (mb *migrationBatch) move(key, newKey, newVal []byte) error {
	if !bytes.Equal(newKey, key) {
		if err := mb.b.Delete(key, nil); err != nil {
			return err
		}
	}
	if err := mb.b.Set(newKey, append([]byte(nil), newVal...), nil); err != nil {
		return err
	}
	if mb.n++; mb.n >= migrateChunk {
		if err := mb.flush(); err != nil {
			return fmt.Errorf("provider: migrating the store: %w", err)
		}
	}
	return nil
}

// migratedEntry is one entry of layout version 1 in version 2: its new key
// (nil when it has moved already) and value; intent says that it is an
// intent record (a key), moved or not.
func migratedEntry(prefix byte, key, val []byte) (newKey, newVal []byte, intent bool, err error) {
	switch prefix {
	case prefixIntent:
		if bytes.IndexByte(key[1:], 0) >= 0 {
			return nil, nil, true, nil // already moved
		}
		var fr FirstResult
		if err := json.Unmarshal(val, &fr); err != nil {
			return nil, nil, false, fmt.Errorf("provider: migrating intent %q: %w: %v", key[1:], ErrCorrupt, err)
		}
		fr.Scope = DefaultScope
		newVal, err = json.Marshal(fr)
		return intentKey(fr.Scope, string(key[1:])), newVal, true, err
	case prefixIntentOrder:
		if bytes.IndexByte(val, 0) >= 0 {
			return nil, nil, false, nil
		}
		return key, []byte(keyName(DefaultScope, string(val))), false, nil
	case prefixIndex:
		// x <id> 0x00 <kind> <seq>: the id part holds a 0x00 only once
		// moved.
		if len(key) < 1+1+1+8 || bytes.IndexByte(key[1:len(key)-10], 0) >= 0 {
			return nil, nil, false, nil
		}
		id := string(key[1 : len(key)-10])
		return binary.BigEndian.AppendUint64(indexPrefix(DefaultScope, id, key[len(key)-9]), binary.BigEndian.Uint64(key[len(key)-8:])), nil, false, nil
	}
	return nil, nil, false, nil
}
