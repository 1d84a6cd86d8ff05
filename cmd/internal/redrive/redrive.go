package redrive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
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
