package redrive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// HeaderRedriveOf names, on an approval message republished from a dead
// letter, the dead letter's sequence in the DEADLETTERS stream.
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

// Redriven reads the APPROVALS stream's headers and returns, for each dead
// letter that was redriven, the APPROVALS sequences of its redrives in order.
func Redriven(ctx context.Context, js jetstream.JetStream) (map[uint64][]uint64, error) {
	out := map[uint64][]uint64{}
	_, err := storedmsg.ReadStream(ctx, js, topology.ApprovalsStream, true, func(m jetstream.Msg) error {
		of := m.Headers().Get(HeaderRedriveOf)
		if of == "" {
			return nil
		}
		dl, err := strconv.ParseUint(of, 10, 64)
		if err != nil {
			return nil // not a mark of ours
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("redrive: reading approvals: %w", err)
		}
		out[dl] = append(out[dl], meta.Sequence.Stream)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redrive: looking for earlier redrives: %w", err)
	}
	for _, seqs := range out {
		slices.Sort(seqs)
	}
	return out, nil
}

// MsgID is the message id of a redrive of dl: derived from the dead letter,
// so that the stream stores one redrive of it per duplicate window, or, when
// forced, new on every call.
func MsgID(dl *DeadLetter, force bool) string {
	id := fmt.Sprintf("redrive-%d-of-%d", dl.Seq, dl.ApprovalSeq)
	if force {
		id += "-" + nuid.Next()
	}
	return id
}

// Redrive publishes dl's envelope again on the APPROVALS subject of its
// intent, marked with HeaderRedriveOf. The returned Sent has Duplicate set
// when the stream already held a redrive of dl with the same message id
// (another redrive within the duplicate window); nothing new was stored
// then, and Sent.StreamSeq is that earlier message. Callers check Redriven
// first; Redrive itself does not.
func Redrive(ctx context.Context, js jetstream.JetStream, dl *DeadLetter, force bool) (send.Sent, error) {
	if len(dl.Envelope) == 0 {
		return send.Sent{}, fmt.Errorf("redrive: dead letter %d has no payload to republish", dl.Seq)
	}
	h := nats.Header{}
	h.Set(HeaderRedriveOf, strconv.FormatUint(dl.Seq, 10))
	sent, err := send.NewClient(js).Publish(ctx, send.Unchecked(dl.Envelope), send.MsgID(MsgID(dl, force)), send.Header(h))
	if err != nil {
		return sent, fmt.Errorf("redrive: republishing dead letter %d: %w", dl.Seq, err)
	}
	return sent, nil
}
