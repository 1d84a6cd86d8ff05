package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ReadStream calls fn for every message stored in stream as of the call,
// in order (optionally headers only). It stops at the last sequence the
// stream held when the call began.
func ReadStream(ctx context.Context, js jetstream.JetStream, stream string, headersOnly bool, fn func(jetstream.Msg) error) error {
	_, err := readStream(ctx, js, stream, headersOnly, fn)
	return err
}

// readStream is ReadStream that also returns the stream's state and
// configuration as of the call: the messages read are those up to its
// LastSeq.
func readStream(ctx context.Context, js jetstream.JetStream, stream string, headersOnly bool, fn func(jetstream.Msg) error) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("audit: opening stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	return info, readFrom(ctx, s, stream, info.State, headersOnly, 0, fn)
}

// readFrom calls fn for the messages of s up to state's last sequence, from
// sequence from on (0: from the first).
func readFrom(ctx context.Context, s jetstream.Stream, stream string, state jetstream.StreamState, headersOnly bool, from uint64, fn func(jetstream.Msg) error) error {
	last := state.LastSeq
	if state.Msgs == 0 || last == 0 {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: headersOnly}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("audit: reading stream %s: %w", stream, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("audit: reading stream %s: %w", stream, err)
		}
		if err := fn(m); err != nil {
			return err
		}
		if meta.Sequence.Stream >= last {
			return nil
		}
	}
}

// CountReceipts counts the stored receipts by outcome (from their headers).
func CountReceipts(ctx context.Context, js jetstream.JetStream) (map[string]int64, error) {
	out := map[string]int64{}
	err := ReadStream(ctx, js, topology.ReceiptsStream, true, func(m jetstream.Msg) error {
		out[m.Headers().Get(topology.HeaderOutcome)]++
		return nil
	})
	return out, err
}

// ReceiptsBySeq reads every stored receipt, grouped by the approval message
// (stream sequence) it is for. A receipt that does not decode makes it fail,
// naming that receipt's sequence in the RECEIPTS stream, after the others
// are read; ReadReceipts reports such receipts instead.
func ReceiptsBySeq(ctx context.Context, js jetstream.JetStream) (map[uint64][]*document.Receipt, error) {
	out, bad, err := ReadReceipts(ctx, js)
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("audit: %d stored receipts do not decode; the first, RECEIPTS sequence %d: %s", len(bad), bad[0].Seq, bad[0].Err)
	}
	return out, err
}

// Undecodable is a stored receipt that does not decode.
type Undecodable struct {
	// Seq is the receipt's sequence in the RECEIPTS stream.
	Seq uint64 `json:"seq"`
	// StreamSeq is the approval message its header names, 0 when none.
	StreamSeq uint64 `json:"stream_seq,omitempty"`
	Err       string `json:"error"`
}

// ReadReceipts reads every stored receipt, grouped by the approval message
// (stream sequence) it is for, and lists those that do not decode.
func ReadReceipts(ctx context.Context, js jetstream.JetStream) (map[uint64][]*document.Receipt, []Undecodable, error) {
	out, _, bad, err := readReceipts(ctx, js)
	return out, bad, err
}

// readReceipts is ReadReceipts that also returns, per approval message, the
// time the RECEIPTS stream stored its first receipt.
func readReceipts(ctx context.Context, js jetstream.JetStream) (map[uint64][]*document.Receipt, map[uint64]time.Time, []Undecodable, error) {
	out := map[uint64][]*document.Receipt{}
	first := map[uint64]time.Time{}
	var bad []Undecodable
	err := ReadStream(ctx, js, topology.ReceiptsStream, false, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		r, u, ok := decodeStored(m)
		if !ok {
			bad = append(bad, u)
			return nil
		}
		seq := r.Delivery.StreamSeq
		out[seq] = append(out[seq], r)
		if t, ok := first[seq]; !ok || meta.Timestamp.Before(t) {
			first[seq] = meta.Timestamp
		}
		return nil
	})
	return out, first, bad, err
}

// DeadLetterSeqs returns the approval stream sequences that have a dead letter.
func DeadLetterSeqs(ctx context.Context, js jetstream.JetStream) (map[uint64]string, error) {
	out := map[uint64]string{}
	err := ReadStream(ctx, js, topology.DeadLetterStream, true, func(m jetstream.Msg) error {
		seq, err := strconv.ParseUint(m.Headers().Get(topology.HeaderStreamSeq), 10, 64)
		if err != nil {
			return errors.New("audit: a dead letter without its stream sequence")
		}
		out[seq] = m.Headers().Get(topology.HeaderReason)
		return nil
	})
	return out, err
}

// ConsumerState is the shared consumer's progress.
type ConsumerState struct {
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	Waiting     int    `json:"waiting"`
	// Delivered counts every delivery the consumer made, first or again.
	Delivered uint64 `json:"delivered"`
}

// Consumer reads the shared consumer's state.
func Consumer(ctx context.Context, js jetstream.JetStream) (ConsumerState, error) {
	st, _, err := consumer(ctx, js)
	return st, err
}

// consumer reads the shared consumer's state and the executors' delivery budget.
func consumer(ctx context.Context, js jetstream.JetStream) (ConsumerState, int, error) {
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return ConsumerState{}, 0, fmt.Errorf("audit: opening consumer %s: %w", topology.Consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ConsumerState{}, 0, fmt.Errorf("audit: reading consumer %s: %w", topology.Consumer, err)
	}
	// The executors call the service on deliveries up to their budget (kept
	// in the consumer's metadata) and dead-letter later ones without a call.
	budget := topology.CallBound(info.Config)
	return ConsumerState{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered, Waiting: info.NumWaiting, Delivered: info.Delivered.Consumer},
		budget, nil
}
