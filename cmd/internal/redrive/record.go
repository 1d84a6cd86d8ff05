package redrive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Bucket is the key-value bucket that records which dead letters were
// redriven: one entry per dead letter, keyed by its DEADLETTERS sequence.
// Provisioning makes it; under deploy/auth only the operator writes it.
const Bucket = "sendtwice-redrives"

// maxRecordTries bounds the compare-and-set loop of Records.Add when
// redrives of one dead letter are recorded at once.
const maxRecordTries = 16

// BucketConfig is the bucket: file storage, one revision per key (the
// entry lists every redrive), no TTL, replicated like the streams.
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "which dead letters executor redrive republished, and as which approvals messages; written by the operator alone",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// Ensure creates or updates the bucket with replicas (0 or less: 1).
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if _, err := natsconn.Bucket(ctx, js, BucketConfig(replicas), true); err != nil {
		return fmt.Errorf("redrive: provisioning the redrive record: %w", err)
	}
	return nil
}

// record is one dead letter's entry: when the dead letter was stored (so
// that an entry left by an earlier DEADLETTERS stream with the same
// sequence is not taken for this one) and the approvals messages it was
// republished as, in order.
type record struct {
	Stored     time.Time `json:"dead_letter_stored"`
	RedrivenAs []uint64  `json:"redriven_as"`
}

// Records is the record of redrives in the bucket. Only what it holds says
// that a dead letter was redriven: no header on an approvals message, which
// any publisher could set, is believed.
type Records struct {
	kv jetstream.KeyValue // nil: no bucket, nothing recorded (a dry run)
}

// OpenRecords opens the bucket. When it is missing, create says whether to
// make it (where the connection may, as without deploy/auth); a dry run
// passes false and reads no record instead.
func OpenRecords(ctx context.Context, js jetstream.JetStream, create bool) (*Records, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return &Records{}, nil
		}
		replicas := 1
		if s, serr := js.Stream(ctx, topology.DeadLetterStream); serr == nil {
			replicas = s.CachedInfo().Config.Replicas
		}
		if err := Ensure(ctx, js, replicas); err != nil {
			return nil, fmt.Errorf("redrive: no bucket %s, and making it failed (run executor provision; under deploy/auth only provisioning may): %w", Bucket, err)
		}
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("redrive: opening bucket %s: %w", Bucket, err)
	}
	return &Records{kv: kv}, nil
}

func recordKey(dl *DeadLetter) string { return strconv.FormatUint(dl.Seq, 10) }

// get reads dl's entry and its revision; an entry of another dead letter
// with the same sequence (stored at another time) reads as none.
func (r *Records) get(ctx context.Context, dl *DeadLetter) (record, uint64, error) {
	if r.kv == nil {
		return record{}, 0, nil
	}
	e, err := r.kv.Get(ctx, recordKey(dl))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, 0, nil
	}
	if err != nil {
		return record{}, 0, fmt.Errorf("redrive: reading the record of dead letter %d: %w", dl.Seq, err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return record{}, 0, fmt.Errorf("redrive: reading the record of dead letter %d: %w", dl.Seq, err)
	}
	if !rec.Stored.Equal(dl.Stored) {
		rec.RedrivenAs = nil
	}
	return rec, e.Revision(), nil
}

// RedrivenAs returns the approvals messages dl was recorded redriven as,
// in order; none when it never was.
func (r *Records) RedrivenAs(ctx context.Context, dl *DeadLetter) ([]uint64, error) {
	rec, _, err := r.get(ctx, dl)
	return rec.RedrivenAs, err
}

// Add records that dl was republished as approvals message seq.
func (r *Records) Add(ctx context.Context, dl *DeadLetter, seq uint64) error {
	if r.kv == nil {
		return fmt.Errorf("redrive: recording dead letter %d: no bucket %s", dl.Seq, Bucket)
	}
	for range maxRecordTries {
		rec, rev, err := r.get(ctx, dl)
		if err != nil {
			return err
		}
		rec.Stored = dl.Stored
		rec.RedrivenAs = append(rec.RedrivenAs, seq)
		b, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("redrive: recording dead letter %d: %w", dl.Seq, err)
		}
		if rev == 0 {
			_, err = r.kv.Create(ctx, recordKey(dl), b)
		} else {
			_, err = r.kv.Update(ctx, recordKey(dl), b, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("redrive: recording dead letter %d: %w", dl.Seq, err)
		}
	}
	return fmt.Errorf("redrive: recording dead letter %d: the record changed under every write", dl.Seq)
}

// NewMsgID is a new message id for a redrive: 128 random bits, so that no
// publisher can store a message under it first and have the redrive taken
// for a duplicate.
func NewMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "redrive-" + hex.EncodeToString(b[:])
}
