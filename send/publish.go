package send

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
)

// ErrOption is matched by the error of a Publish or Send given an option it
// cannot honour (a message id in Header, an empty MsgID, a MsgID the
// Client used for another envelope); nothing was published.
var ErrOption = errors.New("send: invalid option")

// Option changes one Publish or Send.
type Option func(*options)

type options struct {
	msgID    string
	header   nats.Header
	deadline time.Time
	// timeout, when set, is turned into a deadline when a call starts.
	timeout time.Duration
	err     error
}

// MsgID publishes under the caller's message id instead of a new one. A
// caller that retries one publish (after a lost connection, a server
// restart) passes the same id to each try, so that the stream stores the
// message once and Sent.Duplicate says a try found it stored. The stream
// remembers an id for its duplicate window only (2 minutes by default): a
// try after that is stored again, as a new send. One id belongs to one
// envelope: every other publish needs an id of its own (NewMsgID), and a
// Client refuses with ErrOption an id it used for another envelope within
// the window. Publishing an envelope again under a new id is a real send,
// which the task service answers Replayed.
func MsgID(id string) Option {
	return func(o *options) {
		if id == "" && o.err == nil {
			o.err = fmt.Errorf("%w: an empty message id (NewMsgID makes one)", ErrOption)
		}
		o.msgID = id
	}
}

// NewMsgID returns a message id for one publish, unique to it: the tag
// "send-" and 128 random bits (crypto/rand), so that nobody who saw one
// id can tell another, and publish ahead under it to have a send taken
// for a duplicate.
func NewMsgID() string {
	const tag = "send-"
	var bits [16]byte
	_, _ = rand.Read(bits[:]) // never fails: crypto/rand.Read crashes the program instead
	var id [len(tag) + 22]byte
	copy(id[:], tag)
	base64.RawURLEncoding.Encode(id[len(tag):], bits[:])
	return string(id[:])
}

// Header adds the caller's headers to the message (such as where it comes
// from). The subject and the message id are the package's: a header that
// names a message id (Nats-Msg-Id) is refused with ErrOption; use MsgID.
func Header(h nats.Header) Option {
	return func(o *options) {
		if h.Get(jetstream.MsgIDHeader) != "" && o.err == nil {
			o.err = fmt.Errorf("%w: a %s header: the message id is set with MsgID", ErrOption, jetstream.MsgIDHeader)
		}
		if o.header == nil {
			o.header = nats.Header{}
		}
		for k, vs := range h {
			for _, v := range vs {
				o.header.Add(k, v)
			}
		}
	}
}

// Deadline bounds the call: the publish and, for Send, the wait for the
// receipt end at t (or when ctx ends, if that comes first).
func Deadline(t time.Time) Option {
	return func(o *options) { o.deadline, o.timeout = t, 0 }
}

// Timeout is Deadline at d from the start of the call: an option made once
// bounds every call it is given to by d from that call's start.
func Timeout(d time.Duration) Option {
	return func(o *options) { o.deadline, o.timeout = time.Time{}, d }
}

// apply reads opts over the defaults: a new message id, no headers, no
// deadline but ctx's.
func apply(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.msgID == "" && o.err == nil {
		o.msgID = NewMsgID()
	}
	if o.timeout != 0 {
		o.deadline = time.Now().Add(o.timeout)
	}
	return o, o.err
}

// within is ctx bounded by the deadline option, if one was given.
func (o options) within(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, o.deadline)
}

// publishKey stores data on the APPROVALS stream under the approvals
// subject of the key (scope, intentID), approvals.<scope>.<intent> (scope
// "" is the default scope), with o's message id and headers, and waits for
// the stream's ack. A tenant's approval is stored first by the tenant's
// intake stream, which APPROVALS sources (topology's tenants.go): its
// APPROVALS sequence is then read back (approvalsSeq). Its error is the
// stream's or the connection's.
//
// The publish is a producer span, send <subject>, a child of ctx's span or
// the root of a new trace; its trace context goes in the message's
// headers (traceparent, tracestate) and its trace id in Sent.TraceID.
func publishKey(ctx context.Context, js jetstream.JetStream, scope, intentID string, data []byte, o options) (Sent, error) {
	s := Sent{Subject: subjects.Approval(scope, intentID), MsgID: o.msgID, Scope: scope, IntentID: intentID}
	ctx, span := startSend(ctx, &s, data)
	defer span.End()
	err := storeKey(ctx, js, &s, data, o)
	tracing.Fail(span, err)
	return s, err
}

// producer is the option of every publish span, made once.
var producer = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// startSend starts the span of the publish of s (data), and sets
// s.TraceID when it records. A span that does not record is named "send"
// and given nothing, so that tracing that is off costs no more than the
// span and its context.
func startSend(ctx context.Context, s *Sent, data []byte) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, "send", producer...)
	if span.IsRecording() {
		describeSend(span, *s, data)
		s.TraceID = tracing.TraceID(ctx)
	}
	return ctx, span
}

// describeSend names the span of the publish of s and gives it its
// attributes: OpenTelemetry's messaging ones and the key and destination
// of the approval, read from data.
func describeSend(span trace.Span, s Sent, data []byte) {
	span.SetName("send " + s.Subject)
	scope := s.Scope
	if scope == "" {
		scope = document.DefaultScope
	}
	span.SetAttributes(tracing.NATS,
		tracing.MessagingDestination.String(s.Subject),
		tracing.MessagingOperation.String("send"),
		tracing.MessagingMessageID.String(s.MsgID),
		tracing.IntentID.String(s.IntentID),
		tracing.Scope.String(scope),
		tracing.Destination.String(destinationOf(data)))
}

// destinationOf is the destination the envelope's request names, the
// default one when it names none, and "" when its request cannot be read.
func destinationOf(data []byte) string {
	parts, err := document.SplitEnvelope(data)
	if err != nil {
		return ""
	}
	request, _ := parts.Request.(map[string]any)
	if request == nil {
		return ""
	}
	if d, ok := request["destination"].(string); ok && d != "" {
		return d
	}
	return document.DefaultDestination
}

// storeKey is publishKey's publish, into s, under ctx's trace context.
func storeKey(ctx context.Context, js jetstream.JetStream, s *Sent, data []byte, o options) error {
	scope := s.Scope
	m := nats.NewMsg(s.Subject)
	for k, vs := range o.header {
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	// After the caller's headers: a traceparent of the caller's own gives
	// way to the publish span's.
	tracing.Inject(ctx, m.Header)
	m.Data = data
	// No expected stream: a tenant's intake stores it under its own name,
	// checked below.
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(s.MsgID), jetstream.WithRetryAttempts(5))
	if err != nil {
		return err
	}
	s.Duplicate = ack.Duplicate
	switch ack.Stream {
	case topology.ApprovalsStream:
		s.StreamSeq = ack.Sequence
		return nil
	case topology.IntakeStream(subjects.ScopeToken(scope)):
		s.StreamSeq, err = approvalsSeq(ctx, js, *s, ack)
		return err
	}
	return fmt.Errorf("stored by stream %q as message %d, which is neither %s nor the scope's intake stream %s: the server's streams are not as provisioned",
		ack.Stream, ack.Sequence, topology.ApprovalsStream, topology.IntakeStream(subjects.ScopeToken(scope)))
}

// Reading back the APPROVALS sequence of an approval an intake stored:
// the first try at once, then a growing pause, up to intakePauseMax.
const (
	intakePauseFirst = 5 * time.Millisecond
	intakePauseMax   = 500 * time.Millisecond
)

// approvalsSeq returns the APPROVALS sequence of the copy of s that
// APPROVALS sourced from the intake that acknowledged it: the last message
// on s's subject, read with a direct get (the only read of APPROVALS a
// tenant may make, confined to its own scope), once it names the intake
// and the sequence of ack in its Nats-Stream-Source header. It waits for
// the copy until ctx ends.
func approvalsSeq(ctx context.Context, js jetstream.JetStream, s Sent, ack *jetstream.PubAck) (uint64, error) {
	api := storedmsg.APIPrefix(js) + "DIRECT.GET." + topology.ApprovalsStream
	want := strconv.FormatUint(ack.Sequence, 10)
	pause := intakePauseFirst
	for {
		m, err := lastStored(ctx, js.Conn(), api, topology.ApprovalsStream, s.Subject)
		if err != nil && !transient(err) {
			return 0, fmt.Errorf("stored by %s as message %d; reading its %s sequence: %w", ack.Stream, ack.Sequence, topology.ApprovalsStream, err)
		}
		if m != nil {
			stream, seq, ok := topology.SourcedFrom(m.Header.Get(topology.HeaderStreamSource))
			if ok && stream == ack.Stream && seq == want {
				return m.Sequence, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("stored by %s as message %d, not yet seen in %s (full, or a later message on %s hides it): %w",
				ack.Stream, ack.Sequence, topology.ApprovalsStream, s.Subject, ctx.Err())
		case <-time.After(pause):
			pause = min(2*pause, intakePauseMax)
		}
	}
}
