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

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ErrHeader marks a stored message whose headers do not decode: Next
// returns the message (without headers) with it, so that a reader may go
// on past it.
var ErrHeader = errors.New("storedmsg: the stored message's headers do not decode")

// APIPrefix is the JetStream API prefix js sends its requests to: its
// domain's, its own API prefix, or the default.
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// Getter reads the messages of one stream with its message get.
type Getter struct {
	nc  *nats.Conn
	api string // the message get's API subject
}

// NewGetter returns a Getter of stream on js's server, through js's API
// prefix or domain.
func NewGetter(js jetstream.JetStream, stream string) Getter {
	return Getter{nc: js.Conn(), api: APIPrefix(js) + "STREAM.MSG.GET." + stream}
}

// From is where Next starts: at sequence Seq, or, when Time is not zero,
// at the first message stored at or after Time.
type From struct {
	Seq  uint64
	Time time.Time
}

// request and response are the JetStream API's message get, as package
// jetstream sends and decodes it (it offers no start time).
type request struct {
	Seq        uint64     `json:"seq,omitempty"`
	NextBySubj string     `json:"next_by_subj"`
	StartTime  *time.Time `json:"start_time,omitempty"`
}

type response struct {
	Type    string              `json:"type"`
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// Next returns the first message stored on subject at or after from, or
// nil when there is none. A message whose headers do not decode comes
// back without them, with an error matching ErrHeader. Errors of the
// request and of the server are returned as they are, for the caller to
// say what it was reading.
func (g Getter) Next(ctx context.Context, subject string, from From) (*jetstream.RawStreamMsg, error) {
	req := request{Seq: from.Seq, NextBySubj: subject}
	if !from.Time.IsZero() {
		req.Seq, req.StartTime = 0, &from.Time
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("storedmsg: encoding a message get on %s: %w", subject, err)
	}
	reply, err := g.nc.RequestWithContext(ctx, g.api, body)
	if err != nil {
		return nil, err
	}
	var resp response
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("storedmsg: an answer that does not decode: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time}
	if m.Sequence < req.Seq || m.Subject != subject {
		return nil, fmt.Errorf("storedmsg: the stream answered a message get on %s from %d with %s at %d", subject, req.Seq, m.Subject, m.Sequence)
	}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return m, fmt.Errorf("%w: %s at %d: %w", ErrHeader, m.Subject, m.Sequence, err)
		}
	}
	return m, nil
}

// Named returns the approval message a stored receipt's header names (its
// stream sequence), and whether it names one.
func Named(h nats.Header) (uint64, bool) {
	seq, err := strconv.ParseUint(h.Get(topology.HeaderStreamSeq), 10, 64)
	return seq, err == nil
}

// Ends returns the approval message a stored receipt ends, read from its
// headers (the message it names and its outcome), and whether it ends one:
// see document.Ends.
func Ends(h nats.Header) (uint64, bool) {
	named, ok := Named(h)
	if !ok {
		return 0, false
	}
	return document.Ends(named, h.Get(topology.HeaderOutcome))
}

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
