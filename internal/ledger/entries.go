package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/taskservice"
)

// Stored is one entry as the bucket holds it, for an audit: its key, the
// revision that last wrote it and when the bucket stored that revision.
type Stored struct {
	Key      string
	Revision uint64
	Written  time.Time
	// Entry is the value decoded; meaningful only when Bad is empty.
	Entry taskservice.LedgerEntry
	// Bad says why the value is not an entry of its key: it does not
	// decode, lacks a digest or a task id, or names another key.
	Bad string
}

// Entries reads every entry of the bucket, in key order, leaving out the
// per-key locks, the in-doubt records and the mark key (every key that
// starts with '_'). It only reads, and makes no consumer: the bucket's
// stream lists its keys and each key's latest revision is read by itself
// (the reads a ledger's Open and Get make). A missing bucket is an error
// wrapping ErrNoBucket.
func Entries(ctx context.Context, js jetstream.JetStream) ([]Stored, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w %s", ErrNoBucket, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: opening bucket %s: %w", Bucket, err)
	}
	s, err := js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening the stream of bucket %s: %w", Bucket, err)
	}
	prefix := "$KV." + Bucket + "."
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("ledger: listing the keys of bucket %s: %w", Bucket, err)
	}
	var out []Stored
	for subject := range info.State.Subjects {
		key := strings.TrimPrefix(subject, prefix)
		if strings.HasPrefix(key, "_") {
			continue // the locks, the in-doubt records, the mark key: no scope starts with '_'
		}
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // removed (a TTL, a purge) since the keys were listed
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: reading %s: %w", key, err)
		}
		st := Stored{Key: key, Revision: e.Revision(), Written: e.Created()}
		st.Entry, st.Bad = decodeKeyed(key, e.Value())
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stored) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// decodeKeyed decodes the value stored under key, saying why it is not an
// entry of that key when it is not one.
func decodeKeyed(key string, b []byte) (taskservice.LedgerEntry, string) {
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return taskservice.LedgerEntry{}, "not an entry: " + err.Error()
	}
	e, err := decode(b, v.Scope, v.IntentID)
	if err != nil {
		return taskservice.LedgerEntry{}, err.Error()
	}
	if named, err := Key(e.Scope, e.IntentID); err != nil || named != key {
		return e, fmt.Sprintf("it names scope %q and intent id %q, not its key", e.Scope, e.IntentID)
	}
	if e.RequestDigest == "" || e.TaskID == "" {
		return e, "it lacks a request digest or a task id"
	}
	return e, ""
}
