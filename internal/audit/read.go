package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ReadStream calls fn for every message stored in stream as of the call,
// in order (optionally headers only). It stops at the last sequence the
// stream held when the call began.
func ReadStream(ctx context.Context, js jetstream.JetStream, stream string, headersOnly bool, fn func(jetstream.Msg) error) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("audit: opening stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 || last == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
		HeadersOnly:   headersOnly,
	})
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
// (stream sequence) it is for.
func ReceiptsBySeq(ctx context.Context, js jetstream.JetStream) (map[uint64][]*document.Receipt, error) {
	out := map[uint64][]*document.Receipt{}
	err := ReadStream(ctx, js, topology.ReceiptsStream, false, func(m jetstream.Msg) error {
		r, err := document.DecodeReceipt(m.Data())
		if err != nil {
			return fmt.Errorf("audit: a stored receipt does not decode: %w", err)
		}
		out[r.Delivery.StreamSeq] = append(out[r.Delivery.StreamSeq], r)
		return nil
	})
	return out, err
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
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return ConsumerState{}, fmt.Errorf("audit: opening consumer %s: %w", topology.Consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ConsumerState{}, fmt.Errorf("audit: reading consumer %s: %w", topology.Consumer, err)
	}
	return ConsumerState{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered, Waiting: info.NumWaiting, Delivered: info.Delivered.Consumer}, nil
}
