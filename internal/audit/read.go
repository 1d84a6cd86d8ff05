package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
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
	return info, readFrom(ctx, js, s, stream, info.State, headersOnly, 0, fn)
}

// readBatch is how many messages one pull request asks for.
const readBatch = 512

// readFrom calls fn for the messages of s up to state's last sequence, from
// sequence from on (0: from the first).
//
// It reads every stored message, whatever it holds. A message stored with
// no payload and a Status header (a status message a server sent to a
// reply subject the stream captures, or one published to look like it)
// must reach fn like any other, so that the audit reports it; the
// library's consumers take such a message for the server's answer to their
// pull and drop it or stop. So the pull is made here, on an inbox of its
// own: a message that carries a JetStream ack subject as its reply is a
// stored message, whatever its headers say; anything else is the server's
// answer to the pull.
func readFrom(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, stream string, state jetstream.StreamState, headersOnly bool, from uint64, fn func(jetstream.Msg) error) error {
	last := state.LastSeq
	if state.Msgs == 0 || last == 0 || from > last {
		return nil
	}
	cfg := jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		HeadersOnly: headersOnly, MemoryStorage: true, InactiveThreshold: time.Minute, Replicas: 1}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	// A cluster node that has just come back may not answer the API for a
	// moment ("no responders"): try again until ctx ends.
	cons, err := s.CreateConsumer(ctx, cfg)
	for errors.Is(err, nats.ErrNoResponders) && pause(ctx) {
		cons, err = s.CreateConsumer(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name) // else it goes after its inactive threshold
	}()
	return pullAll(ctx, js, stream, name, last, fn)
}

// pullAll pulls the messages of stream's consumer name, on an inbox of its
// own, and calls fn for each stored message up to sequence last.
func pullAll(ctx context.Context, js jetstream.JetStream, stream, name string, last uint64, fn func(jetstream.Msg) error) error {
	nc := js.Conn()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("audit: reading stream %s: %w", stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	next := storedmsg.APIPrefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + name
	req, _ := json.Marshal(map[string]any{"batch": readBatch, "expires": (5 * time.Second).Nanoseconds()})
	var done uint64 // the highest sequence handed to fn
	for {
		if err := nc.PublishRequest(next, inbox, req); err != nil {
			return fmt.Errorf("audit: reading stream %s: %w", stream, err)
		}
		got := 0
	pull:
		for got < readBatch {
			m, err := sub.NextMsgWithContext(ctx)
			if errors.Is(err, nats.ErrNoResponders) {
				// The pull found no server to answer it yet: pull again.
				pause(ctx)
				break pull
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("audit: reading stream %s: %w", stream, err)
			}
			if !strings.HasPrefix(m.Reply, "$JS.ACK.") {
				// The server's answer to the pull: a heartbeat, the pull's
				// end (404, 408), or a refusal.
				switch m.Header.Get("Status") {
				case "100":
					continue
				case "503":
					// No responders for the pull yet (a node coming
					// back): pull again.
					pause(ctx)
					break pull
				case "404", "408":
					if got == 0 {
						// Nothing left to deliver: the sequences up to the
						// last that were not read are gone.
						return nil
					}
				default:
					return fmt.Errorf("audit: reading stream %s: the server answered %s %s", stream, m.Header.Get("Status"), m.Header.Get("Description"))
				}
				break pull
			}
			sm, err := storedMsg(m)
			if err != nil {
				return fmt.Errorf("audit: reading stream %s: %w", stream, err)
			}
			got++
			seq := sm.meta.Sequence.Stream
			if seq <= done || seq > last {
				continue
			}
			done = seq
			if err := fn(sm); err != nil {
				return err
			}
			if seq >= last || sm.meta.NumPending == 0 {
				return nil
			}
		}
	}
}

// pause waits a moment before a read is tried again, and reports whether
// ctx still allows it.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(250 * time.Millisecond):
		return true
	}
}

// errReadOnly refuses to acknowledge a message the audit read.
var errReadOnly = errors.New("audit: a message read by the audit cannot be acknowledged")

// readMsg is a stored message as the audit reads it: its data, headers and
// metadata, and no way to acknowledge it.
type readMsg struct {
	m    *nats.Msg
	meta *jetstream.MsgMetadata
}

// storedMsg reads the metadata of a stored message from its ack subject:
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>,
// or with <domain>.<account hash> before the stream and a token after.
func storedMsg(m *nats.Msg) (readMsg, error) {
	t := strings.Split(m.Reply, ".")
	switch {
	case len(t) == 9:
		t = append(t[:2], append([]string{"_", ""}, t[2:]...)...)
	case len(t) < 11:
		return readMsg{}, fmt.Errorf("audit: a delivery with an ack subject of unknown form %q", m.Reply)
	}
	num := func(i int) (uint64, error) { return strconv.ParseUint(t[i], 10, 64) }
	delivered, err1 := num(6)
	sseq, err2 := num(7)
	cseq, err3 := num(8)
	ns, err4 := num(9)
	pending, err5 := num(10)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return readMsg{}, fmt.Errorf("audit: a delivery with an ack subject of unknown form %q: %w", m.Reply, err)
	}
	domain := t[2]
	if domain == "_" {
		domain = ""
	}
	return readMsg{m: m, meta: &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Stream: sseq, Consumer: cseq},
		NumDelivered: delivered, NumPending: pending, Timestamp: time.Unix(0, int64(ns)),
		Stream: t[4], Consumer: t[5], Domain: domain,
	}}, nil
}

func (r readMsg) Metadata() (*jetstream.MsgMetadata, error) { return r.meta, nil }
func (r readMsg) Data() []byte                              { return r.m.Data }
func (r readMsg) Headers() nats.Header                      { return r.m.Header }
func (r readMsg) Subject() string                           { return r.m.Subject }
func (r readMsg) Reply() string                             { return r.m.Reply }
func (r readMsg) Ack() error                                { return errReadOnly }
func (r readMsg) DoubleAck(context.Context) error           { return errReadOnly }
func (r readMsg) Nak() error                                { return errReadOnly }
func (r readMsg) NakWithDelay(time.Duration) error          { return errReadOnly }
func (r readMsg) InProgress() error                         { return errReadOnly }
func (r readMsg) Term() error                               { return errReadOnly }
func (r readMsg) TermWithReason(string) error               { return errReadOnly }

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
	err := ReadStream(ctx, js, topology.DeadLetterStream, true, func(m jetstream.Msg) error {
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
