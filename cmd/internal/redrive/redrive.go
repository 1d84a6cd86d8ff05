package redrive

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// HeaderRedriveOf names, on an approval message republished from a dead
// letter, the dead letter's sequence in the DEADLETTERS stream. It is for
// the executors' logs only: any publisher can set it, so redrive never
// reads it (Records says what was redriven).
const HeaderRedriveOf = "Sendtwice-Redrive-Of"

// ErrNoDeadLetter is returned when the DEADLETTERS stream holds no message
// at the sequence asked for.
var ErrNoDeadLetter = errors.New("redrive: no such dead letter")

// DeadLetter is one stored dead letter.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the DEADLETTERS stream.
	Seq uint64
	// ApprovalSeq is the APPROVALS message that was dead-lettered (0 when
	// the dead letter does not say).
	ApprovalSeq uint64
	// Scope and IntentID are read from the envelope (see
	// document.Identify): Scope "" is the default scope, IntentID "" names
	// none. A redrive republishes it on that key's approvals subject.
	Scope     string
	IntentID  string
	Reason    string
	Delivered uint64
	Executor  string
	Stored    time.Time
	// Envelope is the original payload, as it was published.
	Envelope []byte
}

func fromStored(seq uint64, stored time.Time, h nats.Header, data []byte) *DeadLetter {
	num := func(name string) uint64 {
		n, _ := strconv.ParseUint(h.Get(name), 10, 64)
		return n
	}
	id := document.Identify(data)
	return &DeadLetter{
		Seq:         seq,
		ApprovalSeq: num(topology.HeaderStreamSeq),
		Scope:       id.Scope,
		IntentID:    id.IntentID,
		Reason:      h.Get(topology.HeaderReason),
		Delivered:   num(topology.HeaderDelivered),
		Executor:    h.Get(topology.HeaderExecutor),
		Stored:      stored,
		Envelope:    append([]byte(nil), data...),
	}
}

// Get reads the dead letter at seq. When there is none it returns an error
// wrapping ErrNoDeadLetter that says which sequences the stream holds.
func Get(ctx context.Context, js jetstream.JetStream, seq uint64) (*DeadLetter, error) {
	s, err := js.Stream(ctx, topology.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("redrive: opening stream %s: %w", topology.DeadLetterStream, err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		holds := "it holds no messages"
		if info, ierr := s.Info(ctx); ierr == nil && info.State.Msgs > 0 {
			holds = fmt.Sprintf("it holds sequences %d to %d", info.State.FirstSeq, info.State.LastSeq)
		}
		return nil, fmt.Errorf("%w: %d is not in the %s stream (%s)", ErrNoDeadLetter, seq, topology.DeadLetterStream, holds)
	}
	if err != nil {
		return nil, fmt.Errorf("redrive: reading dead letter %d: %w", seq, err)
	}
	return fromStored(raw.Sequence, raw.Time, raw.Header, raw.Data), nil
}

// List reads every dead letter stored as of the call, in order. Dead letters
// stored while it reads (for example of messages just redriven) are not
// included, so one pass over the list never meets a dead letter twice.
func List(ctx context.Context, js jetstream.JetStream) ([]*DeadLetter, error) {
	var out []*DeadLetter
	_, err := storedmsg.ReadStream(ctx, js, topology.DeadLetterStream, false, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("redrive: reading dead letters: %w", err)
		}
		out = append(out, fromStored(meta.Sequence.Stream, meta.Timestamp, m.Headers(), m.Data()))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redrive: reading dead letters: %w", err)
	}
	return out, nil
}

// Redrive publishes dl's envelope again on the APPROVALS subject of its
// intent, under a new unpredictable message id (NewMsgID), and then records
// it in recs. It publishes before it records: a crash in between leaves a
// dead letter that a later run republishes again, which the task service
// answers replayed; the other order would leave one recorded as redriven
// that never was, skipped by every later run: a lost task. The message
// carries HeaderRedriveOf for the executors' logs; redrive never reads it
// back. Callers look at recs first; Redrive itself does not.
func Redrive(ctx context.Context, js jetstream.JetStream, recs *Records, dl *DeadLetter) (send.Sent, error) {
	if len(dl.Envelope) == 0 {
		return send.Sent{}, fmt.Errorf("redrive: dead letter %d has no payload to republish", dl.Seq)
	}
	h := nats.Header{}
	h.Set(HeaderRedriveOf, strconv.FormatUint(dl.Seq, 10))
	sent, err := send.NewClient(js).Publish(ctx, send.Unchecked(dl.Envelope), send.MsgID(NewMsgID()), send.Header(h))
	if err != nil {
		return sent, fmt.Errorf("redrive: republishing dead letter %d: %w", dl.Seq, err)
	}
	if err := recs.Add(ctx, dl, sent.StreamSeq); err != nil {
		return sent, fmt.Errorf("%w; dead letter %d was republished as approvals message %d all the same, and a later run republishes it again (answered replayed)", err, dl.Seq, sent.StreamSeq)
	}
	return sent, nil
}

// Bucket is the key-value bucket that records which dead letters were
// redriven: one entry per dead letter, keyed by its DEADLETTERS sequence.
// Provisioning makes it; under deploy/auth only the operator writes it.
const Bucket = "sendtwice-redrives"

// maxRecordTries bounds the compare-and-set loop of Records.Add when
// redrives of one dead letter are recorded at once.
const maxRecordTries = 16

// Ensure creates or updates the bucket, replicated like the streams
// (replicas 0 or less: 1): file storage, no TTL, one revision a key (the
// entry lists every redrive of its dead letter).
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	cfg := jetstream.KeyValueConfig{Bucket: Bucket, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		Description: "which dead letters executor redrive republished, and as which approvals messages; written by the operator alone"}
	if _, err := natsconn.Bucket(ctx, js, cfg, true); err != nil {
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

// makeBucketWithin bounds OpenRecords' attempt to make a missing bucket:
// under deploy/auth the operator may not, and the server never answers a
// request it refused.
const makeBucketWithin = 5 * time.Second

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
		mctx, cancel := context.WithTimeout(ctx, makeBucketWithin)
		merr := Ensure(mctx, js, replicas)
		cancel()
		if merr != nil {
			return nil, fmt.Errorf("redrive: no bucket %s, and making it failed (run executor provision; under deploy/auth only provisioning may): %w", Bucket, merr)
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
		if slices.Contains(rec.RedrivenAs, seq) {
			return nil // recorded already
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

// NewMsgID is a new message id for a redrive: "redrive-" and 128 random
// bits or more (crypto/rand, in base32), so that no publisher can store a
// message under it first and have the redrive taken for a duplicate.
func NewMsgID() string {
	return "redrive-" + rand.Text()
}
