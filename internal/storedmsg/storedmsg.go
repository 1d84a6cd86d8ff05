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
