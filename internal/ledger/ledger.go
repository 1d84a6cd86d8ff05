package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Bucket is the key-value bucket that holds the ledger.
const Bucket = "sendtwice-intents"

// Lifetime defaults, the same as the task service's key lifetime: an
// entry outlives its latest not_after by the clock allowance and the margin.
const (
	DefaultClockAllowance = 5 * time.Minute
	DefaultMargin         = time.Hour
)

// limitMarkerTTL is how long the bucket keeps the marker of an entry removed
// by its TTL; a positive value is what enables per-message TTLs.
const limitMarkerTTL = time.Minute

// maxPutTries bounds the compare-and-set loop of Put under contention.
const maxPutTries = 16

// Errors of the ledger.
var (
	ErrNoBucket  = errors.New("ledger: no intent ledger bucket")
	ErrBadKey    = errors.New("ledger: bad key")
	ErrBadEntry  = errors.New("ledger: bad entry")
	ErrContended = errors.New("ledger: entry changed under every write")
)

// BucketConfig is the bucket: file storage, one revision per key, per-key
// TTLs enabled, replicated like the streams.
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         Bucket,
		Description:    "the executors' intent ledger: keys of a task service that forgets a key when its task is deleted; each entry lives until its latest not_after plus allowance and margin",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       max(replicas, 1),
		LimitMarkerTTL: limitMarkerTTL,
	}
}

// Ensure creates or updates the bucket with replicas (0 or less: 1).
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if _, err := natsconn.Bucket(ctx, js, BucketConfig(replicas), true); err != nil {
		return fmt.Errorf("ledger: provisioning the intent ledger: %w", err)
	}
	return nil
}

// Options tune a Ledger; zero values take the defaults.
type Options struct {
	// ClockAllowance and Margin extend every entry past its not_after
	// (DefaultClockAllowance, DefaultMargin; a negative value means 0).
	ClockAllowance time.Duration
	Margin         time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Ledger is the intent ledger in the bucket; it implements
// taskservice.Ledger and is safe for concurrent use.
type Ledger struct {
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	allowance time.Duration
	margin    time.Duration
	now       func() time.Time
}

var _ taskservice.Ledger = (*Ledger)(nil)

// Open finds the bucket (Ensure makes it) and returns the ledger in it. A
// missing bucket is an error wrapping ErrNoBucket; so is a bucket made
// without per-key TTLs.
func Open(ctx context.Context, js jetstream.JetStream, o Options) (*Ledger, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w %s: provision it (executor provision, or serve without --no-provision)", ErrNoBucket, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: opening bucket %s: %w", Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading the status of bucket %s: %w", Bucket, err)
	}
	if st.LimitMarkerTTL() <= 0 {
		return nil, fmt.Errorf("%w %s with per-key TTLs: the bucket has no limit-marker TTL (provision it again)", ErrNoBucket, Bucket)
	}
	l := &Ledger{js: js, kv: kv, allowance: DefaultClockAllowance, margin: DefaultMargin, now: time.Now}
	if o.ClockAllowance != 0 {
		l.allowance = max(o.ClockAllowance, 0)
	}
	if o.Margin != 0 {
		l.margin = max(o.Margin, 0)
	}
	if o.Now != nil {
		l.now = o.Now
	}
	return l, nil
}

// Key is the bucket key of (scope, intentID): the scope, ".", and the
// intent's token (see the package documentation).
func Key(scope, intentID string) (string, error) {
	if !document.ValidScope(scope) {
		return "", fmt.Errorf("%w: scope %q is not 1 to %d bytes of [a-z0-9_-] starting with a letter or digit", ErrBadKey, scope, document.MaxScopeBytes)
	}
	if intentID == "" {
		return "", fmt.Errorf("%w: the intent id is empty", ErrBadKey)
	}
	return scope + "." + token(intentID), nil
}

func token(id string) string {
	if subjects.Plain(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "=" + hex.EncodeToString(sum[:])
}

// value is an entry as stored.
type value struct {
	Scope         string     `json:"scope"`
	IntentID      string     `json:"intent_id"`
	RequestDigest string     `json:"request_digest"`
	TaskID        string     `json:"task_id"`
	NotAfter      *time.Time `json:"not_after,omitempty"`
}

func encode(e taskservice.LedgerEntry) ([]byte, error) {
	v := value{Scope: e.Scope, IntentID: e.IntentID, RequestDigest: e.RequestDigest, TaskID: e.TaskID}
	if !e.NotAfter.IsZero() {
		t := e.NotAfter.UTC()
		v.NotAfter = &t
	}
	return json.Marshal(v)
}

func decode(b []byte, scope, intentID string) (taskservice.LedgerEntry, error) {
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return taskservice.LedgerEntry{}, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	if v.Scope != scope || v.IntentID != intentID {
		return taskservice.LedgerEntry{}, fmt.Errorf("%w: the entry read for (%q, %q) names (%q, %q)", ErrBadEntry, scope, intentID, v.Scope, v.IntentID)
	}
	e := taskservice.LedgerEntry{Scope: v.Scope, IntentID: v.IntentID, RequestDigest: v.RequestDigest, TaskID: v.TaskID}
	if v.NotAfter != nil {
		e.NotAfter = *v.NotAfter
	}
	return e, nil
}

// Get returns the entry of (scope, intentID); found is false when there is
// none or it expired.
func (l *Ledger) Get(ctx context.Context, scope, intentID string) (e taskservice.LedgerEntry, found bool, err error) {
	ctx, span := startSpan(ctx, "ledger get", scope, intentID)
	defer func() { endSpan(span, err) }()
	e, _, found, err = l.get(ctx, scope, intentID)
	return e, found, err
}

// startSpan starts the span of one operation on the entry of (scope,
// intentID); its attributes are set only when it records.
func startSpan(ctx context.Context, name, scope, intentID string) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(tracing.IntentID.String(intentID), tracing.Scope.String(scope))
	}
	return ctx, span
}

// endSpan ends span, failed with err if there is one.
func endSpan(span trace.Span, err error) {
	tracing.Fail(span, err)
	span.End()
}

func (l *Ledger) get(ctx context.Context, scope, intentID string) (taskservice.LedgerEntry, uint64, bool, error) {
	key, err := Key(scope, intentID)
	if err != nil {
		return taskservice.LedgerEntry{}, 0, false, err
	}
	kve, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return taskservice.LedgerEntry{}, 0, false, nil
	}
	if err != nil {
		return taskservice.LedgerEntry{}, 0, false, fmt.Errorf("ledger: reading %s: %w", key, err)
	}
	e, err := decode(kve.Value(), scope, intentID)
	if err != nil {
		return taskservice.LedgerEntry{}, 0, false, fmt.Errorf("ledger: reading %s: %w", key, err)
	}
	return e, kve.Revision(), true, nil
}

// TTL is how long an entry with notAfter lives from now: until notAfter
// plus the clock allowance plus the margin, rounded up to a whole second
// and at least one second; 0 (no TTL: kept forever) for a zero notAfter.
func (l *Ledger) TTL(notAfter time.Time) time.Duration {
	if notAfter.IsZero() {
		return 0
	}
	d := notAfter.Add(l.allowance + l.margin).Sub(l.now())
	if d < time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// Put records e, or extends the existing entry of its key to the later
// not_after (a zero one keeping it forever); the first binding stays.
func (l *Ledger) Put(ctx context.Context, e taskservice.LedgerEntry) (err error) {
	ctx, span := startSpan(ctx, "ledger put", e.Scope, e.IntentID)
	defer func() { endSpan(span, err) }()
	key, err := Key(e.Scope, e.IntentID)
	if err != nil {
		return err
	}
	if e.RequestDigest == "" || e.TaskID == "" {
		return fmt.Errorf("%w: an entry needs a request digest and a task id", ErrBadEntry)
	}
	for range maxPutTries {
		old, rev, found, err := l.get(ctx, e.Scope, e.IntentID)
		if err != nil {
			return err
		}
		next := e
		if found {
			next.RequestDigest, next.TaskID = old.RequestDigest, old.TaskID
			switch {
			case old.NotAfter.IsZero():
				return nil // kept forever already
			case !e.NotAfter.IsZero() && !e.NotAfter.After(old.NotAfter):
				return nil // lives long enough already
			}
		}
		b, err := encode(next)
		if err != nil {
			return fmt.Errorf("ledger: encoding %s: %w", key, err)
		}
		ttl := l.TTL(next.NotAfter)
		if !found {
			var opts []jetstream.KVCreateOpt
			if ttl > 0 {
				opts = append(opts, jetstream.KeyTTL(ttl))
			}
			_, err = l.kv.Create(ctx, key, b, opts...)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // written meanwhile: merge with it
			}
		} else {
			_, err = update(ctx, l.js, key, b, rev, ttl)
			if wrongRevision(err) {
				continue // changed meanwhile: merge again
			}
		}
		if err != nil {
			return fmt.Errorf("ledger: writing %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("%w %s (%d tries)", ErrContended, key, maxPutTries)
}

// update writes b as key's next revision if its latest is rev, with a
// per-key TTL of its own when ttl > 0 (KeyValue.Update would drop it);
// wrongRevision says when the key had changed.
func update(ctx context.Context, js jetstream.JetStream, key string, b []byte, rev uint64, ttl time.Duration) (*jetstream.PubAck, error) {
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	return js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + Bucket + "." + key, Data: b}, opts...)
}

// wrongRevision reports whether err is update's refusal of a key changed
// since the revision it was given.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// The prefixes of the bucket keys of what the bucket holds besides
// entries, each followed by the scope, ".", and the intent's token. A
// scope never starts with '_', so none of these keys is an entry's key.
const (
	// LockPrefix starts the key of every per-key lock.
	LockPrefix = "_lock."
	// DoubtPrefix starts the key of every in-doubt record.
	DoubtPrefix = "_doubt."
)

var _ taskservice.Locker = (*Ledger)(nil)

// LockKey is the bucket key of the lock of (scope, intentID).
func LockKey(scope, intentID string) (string, error) { return prefixedKey(LockPrefix, scope, intentID) }

// prefixedKey is prefix and the bucket key of (scope, intentID).
func prefixedKey(prefix, scope, intentID string) (string, error) {
	k, err := Key(scope, intentID)
	if err != nil {
		return "", err
	}
	return prefix + k, nil
}

// LockTTL is the lifetime a lock taken for ttl gets: ttl rounded up to a
// whole second (per-key TTLs count in seconds), and at least one second.
func LockTTL(ttl time.Duration) time.Duration {
	if ttl < time.Second {
		return time.Second
	}
	return (ttl + time.Second - 1).Truncate(time.Second)
}

// lockValue says who holds a lock, for whoever reads the bucket.
type lockValue struct {
	Holder  string    `json:"holder"`
	TakenAt time.Time `json:"taken_at"`
	TTL     string    `json:"ttl"`
}

// Lock takes the lock of (scope, intentID) for ttl (LockTTL rounds it),
// with a create-only write of its key with that per-key TTL: when the key
// exists (another holder, whose TTL has not run out) the error wraps
// taskservice.ErrLocked. It implements taskservice.Locker.
func (l *Ledger) Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (_ taskservice.Lock, err error) {
	ctx, span := startSpan(ctx, "ledger lock", scope, intentID)
	defer func() { endSpan(span, err) }()
	key, err := LockKey(scope, intentID)
	if err != nil {
		return nil, err
	}
	ttl = LockTTL(ttl)
	var id [8]byte
	rand.Read(id[:])
	start := time.Now() // the lock's lifetime counts from before the write
	b, err := json.Marshal(lockValue{Holder: hex.EncodeToString(id[:]), TakenAt: l.now().UTC(), TTL: ttl.String()})
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding lock %s: %w", key, err)
	}
	rev, err := l.kv.Create(ctx, key, b, jetstream.KeyTTL(ttl))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("ledger: taking lock %s: %w", key, taskservice.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: taking lock %s: %w", key, err)
	}
	return &lock{js: l.js, kv: l.kv, key: key, value: b, ttl: ttl, rev: rev, deadline: start.Add(ttl)}, nil
}

// lock is one held lock: the revision we wrote last.
type lock struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	key   string
	value []byte
	ttl   time.Duration

	mu       sync.Mutex
	rev      uint64
	deadline time.Time // by this process's monotonic clock
}

var _ taskservice.Renewer = (*lock)(nil)

// Held reads the key: the lock is ours while its latest revision is the
// one we wrote and its TTL has not run out by our own clock (the server
// removes an expired key a little later).
func (k *lock) Held(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !time.Now().Before(k.deadline) {
		return fmt.Errorf("ledger: lock %s: its TTL ran out: %w", k.key, taskservice.ErrLockLost)
	}
	e, err := k.kv.Get(ctx, k.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("ledger: lock %s: the key is gone: %w", k.key, taskservice.ErrLockLost)
	case err != nil:
		return fmt.Errorf("ledger: reading lock %s: %w", k.key, err)
	case e.Revision() != k.rev:
		return fmt.Errorf("ledger: lock %s: revision %d is another holder's (ours was %d): %w", k.key, e.Revision(), k.rev, taskservice.ErrLockLost)
	}
	return nil
}

// Release purges the key only if its latest revision is still ours (a
// conditional write): a lock lost and taken by another since stays as it
// is, and that is not an error.
func (k *lock) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.kv.Purge(ctx, k.key, jetstream.LastRevision(k.rev), jetstream.PurgeTTL(limitMarkerTTL))
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil // not ours any more
	}
	if err != nil {
		return fmt.Errorf("ledger: releasing lock %s: %w", k.key, err)
	}
	return nil
}

// Renew writes the lock's value again with a fresh TTL, conditional on
// its latest revision being ours: the lock lives its TTL from now. A lock
// whose TTL ran out by our clock, or whose key changed (expired, purged,
// taken by another), is lost, and nothing is written.
func (k *lock) Renew(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	start := time.Now()
	if !start.Before(k.deadline) {
		return fmt.Errorf("ledger: renewing lock %s: its TTL ran out: %w", k.key, taskservice.ErrLockLost)
	}
	ack, err := update(ctx, k.js, k.key, k.value, k.rev, k.ttl)
	if wrongRevision(err) {
		return fmt.Errorf("ledger: renewing lock %s: the key is no longer at our revision %d: %w", k.key, k.rev, taskservice.ErrLockLost)
	}
	if err != nil {
		return fmt.Errorf("ledger: renewing lock %s: %w", k.key, err)
	}
	k.rev, k.deadline = ack.Sequence, start.Add(k.ttl)
	return nil
}
