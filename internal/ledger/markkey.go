package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MarkKeyKey is the bucket key of the deployment's mark key: the secret
// under which the executors tag what names and marks a task (a CalDAV
// resource's name, UID and proof; a Redmine issue's mark), so that nobody
// without it can name a future task or forge a mark. It starts with '_', as
// no scope does, so it is never an entry's key.
const MarkKeyKey = "_mark-key"

// ErrNoMarkKey is wrapped by MarkKey when the bucket holds no mark key and
// the caller may not make one.
var ErrNoMarkKey = errors.New("ledger: the deployment has no mark key yet")

// markKeyBytes is the length of a mark key: 256 bits, what the adapters
// take at least.
const markKeyBytes = 32

// markKeyValue is the stored mark key.
type markKeyValue struct {
	Key     string    `json:"key"` // base64, markKeyBytes bytes
	Created time.Time `json:"created"`
}

// MarkKey returns the deployment's mark key from the intent ledger's bucket
// on js. When there is none, create says whether to make one (256 random
// bits, a create-only write, so that executors starting at once agree on
// the first); without create the error wraps ErrNoMarkKey. The key is kept
// for ever (no TTL) and never changes: a task tagged under it is proven
// only by it. A missing bucket is an error wrapping ErrNoBucket.
func MarkKey(ctx context.Context, js jetstream.JetStream, create bool) ([]byte, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w %s: provision it (executor provision, or serve without --no-provision)", ErrNoBucket, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: opening bucket %s: %w", Bucket, err)
	}
	for range 2 {
		e, err := kv.Get(ctx, MarkKeyKey)
		if err == nil {
			return decodeMarkKey(e.Value())
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("ledger: reading the mark key: %w", err)
		}
		if !create {
			return nil, fmt.Errorf("%w: no executor has served since the bucket %s was made", ErrNoMarkKey, Bucket)
		}
		key := make([]byte, markKeyBytes)
		rand.Read(key)
		b, err := json.Marshal(markKeyValue{Key: base64.StdEncoding.EncodeToString(key), Created: time.Now().UTC()})
		if err != nil {
			return nil, fmt.Errorf("ledger: encoding the mark key: %w", err)
		}
		_, err = kv.Create(ctx, MarkKeyKey, b)
		if err == nil {
			return key, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("ledger: storing the mark key: %w", err)
		}
		// Another executor made it first: read theirs.
	}
	return nil, fmt.Errorf("ledger: the mark key was written and removed while it was read")
}

// decodeMarkKey checks a stored mark key; it never shows the key.
func decodeMarkKey(b []byte) ([]byte, error) {
	var v markKeyValue
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("ledger: the stored mark key does not decode: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(v.Key)
	if err != nil {
		return nil, fmt.Errorf("ledger: the stored mark key is not base64")
	}
	if len(key) < markKeyBytes {
		return nil, fmt.Errorf("ledger: the stored mark key is %d bytes, fewer than %d", len(key), markKeyBytes)
	}
	return key, nil
}
