package audit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// CountReceipts counts the stored receipts by outcome (from their headers).
func CountReceipts(ctx context.Context, js jetstream.JetStream) (map[string]int64, error) {
	out := map[string]int64{}
	_, err := storedmsg.ReadStream(ctx, js, topology.ReceiptsStream, true, func(m jetstream.Msg) error {
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

// Undecodable is a stored record that does not decode: a receipt, a dead
// letter, or a status message stored where an approval belongs.
type Undecodable struct {
	// Stream holds the record; empty means RECEIPTS.
	Stream string `json:"stream,omitempty"`
	// Seq is the record's sequence in its stream.
	Seq uint64 `json:"seq"`
	// StreamSeq is the approval message its header names, 0 when none.
	StreamSeq uint64 `json:"stream_seq,omitempty"`
	Err       string `json:"error"`
}

// headerMsgSize is the header a headers-only read puts on each message: the
// size of the payload it left out.
const headerMsgSize = "Nats-Msg-Size"

// statusMessage describes a stored message that has no payload and carries
// a status (a Status header, or the pending counts the server puts on its
// answer to a pull request): a status message a server sent to a reply
// subject the stream captures, or one made to look like it. It returns ""
// for any other message. A message read headers-only has no payload
// either; its Nats-Msg-Size header says what it had.
func statusMessage(m jetstream.Msg) string {
	h := m.Headers()
	if len(m.Data()) > 0 || h == nil {
		return ""
	}
	if size := h.Get(headerMsgSize); size != "" && size != "0" {
		return ""
	}
	const how = "with no payload: a server's status message stored through a reply subject, or one made to look like it"
	switch st := h.Get("Status"); {
	case st != "":
		if d := h.Get("Description"); d != "" {
			st += " " + d
		}
		return fmt.Sprintf("a status message (Status %s) %s", st, how)
	case h.Get("Nats-Pending-Messages") != "":
		return fmt.Sprintf("a status message (Nats-Pending-Messages %s) %s", h.Get("Nats-Pending-Messages"), how)
	}
	return ""
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
	_, err := storedmsg.ReadStream(ctx, js, topology.ReceiptsStream, false, func(m jetstream.Msg) error {
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

// DeadLetterSeqs returns the approval stream sequences that have a dead
// letter. A dead letter that does not decode makes it fail, naming its
// sequence, after the others are read; ReadDeadLetters reports such dead
// letters instead.
func DeadLetterSeqs(ctx context.Context, js jetstream.JetStream) (map[uint64]string, error) {
	out, bad, err := ReadDeadLetters(ctx, js)
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("audit: %d stored dead letters do not decode; the first, %s sequence %d: %s", len(bad), topology.DeadLetterStream, bad[0].Seq, bad[0].Err)
	}
	return out, err
}

// ReadDeadLetters reads every stored dead letter: the reason of each, by
// the approval stream sequence it names, and the dead letters that do not
// decode (no stream sequence or reason in their headers, or a status
// message).
func ReadDeadLetters(ctx context.Context, js jetstream.JetStream) (map[uint64]string, []Undecodable, error) {
	out := map[uint64]string{}
	var bad []Undecodable
	_, err := storedmsg.ReadStream(ctx, js, topology.DeadLetterStream, true, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		u := Undecodable{Stream: topology.DeadLetterStream, Seq: meta.Sequence.Stream}
		h := m.Headers()
		raw := h.Get(topology.HeaderStreamSeq)
		seq, err := strconv.ParseUint(raw, 10, 64)
		switch {
		case statusMessage(m) != "":
			u.Err = statusMessage(m)
		case raw == "":
			u.Err = "no " + topology.HeaderStreamSeq + " header naming the approval message"
		case err != nil || seq == 0:
			u.Err = fmt.Sprintf("its %s header %q names no approval message", topology.HeaderStreamSeq, raw)
		case h.Get(topology.HeaderReason) == "":
			u.StreamSeq = seq
			u.Err = "no " + topology.HeaderReason + " header"
		default:
			out[seq] = h.Get(topology.HeaderReason)
			return nil
		}
		bad = append(bad, u)
		return nil
	})
	return out, bad, err
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

// consumer reads the shared consumer's state and configuration.
func consumer(ctx context.Context, js jetstream.JetStream) (ConsumerState, jetstream.ConsumerConfig, error) {
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		return ConsumerState{}, jetstream.ConsumerConfig{}, fmt.Errorf("audit: opening consumer %s: %w", topology.Consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ConsumerState{}, jetstream.ConsumerConfig{}, fmt.Errorf("audit: reading consumer %s: %w", topology.Consumer, err)
	}
	return ConsumerState{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered, Waiting: info.NumWaiting, Delivered: info.Delivered.Consumer},
		info.Config, nil
}
