package storedmsg

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
)

// ReadStream calls fn for every message stored in stream as of the call,
// in order (optionally headers only), and returns the stream's state and
// configuration as of the call: the messages read are those up to its
// LastSeq, where it stops. It is the one whole-stream read: the audit,
// redrive and the receipts' counts read through it.
func ReadStream(ctx context.Context, js jetstream.JetStream, stream string, headersOnly bool, fn func(jetstream.Msg) error) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("storedmsg: opening stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
	}
	return info, ReadFrom(ctx, js, s, info.State, headersOnly, 0, fn)
}

// readBatch is how many messages one pull request asks for.
const readBatch = 512

// ReadFrom calls fn for the messages of s up to state's last sequence, from
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
func ReadFrom(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, state jetstream.StreamState, headersOnly bool, from uint64, fn func(jetstream.Msg) error) error {
	stream := s.CachedInfo().Config.Name
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
		return fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
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
		return fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	next := APIPrefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + name
	req, _ := json.Marshal(map[string]any{"batch": readBatch, "expires": (5 * time.Second).Nanoseconds()})
	var done uint64 // the highest sequence handed to fn
	for {
		if err := nc.PublishRequest(next, inbox, req); err != nil {
			return fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
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
				return fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
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
					return fmt.Errorf("storedmsg: reading stream %s: the server answered %s %s", stream, m.Header.Get("Status"), m.Header.Get("Description"))
				}
				break pull
			}
			sm, err := storedMsg(m)
			if err != nil {
				return fmt.Errorf("storedmsg: reading stream %s: %w", stream, err)
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

// errReadOnly refuses to acknowledge a message ReadStream read.
var errReadOnly = errors.New("storedmsg: a message read by the audit cannot be acknowledged")

// readMsg is a stored message as ReadStream reads it: its data, headers and
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
		return readMsg{}, fmt.Errorf("storedmsg: a delivery with an ack subject of unknown form %q", m.Reply)
	}
	num := func(i int) (uint64, error) { return strconv.ParseUint(t[i], 10, 64) }
	delivered, err1 := num(6)
	sseq, err2 := num(7)
	cseq, err3 := num(8)
	ns, err4 := num(9)
	pending, err5 := num(10)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return readMsg{}, fmt.Errorf("storedmsg: a delivery with an ack subject of unknown form %q: %w", m.Reply, err)
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
