package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Sent describes one published message.
type Sent struct {
	Subject   string
	MsgID     string
	StreamSeq uint64
	// Duplicate is true when the stream had already stored this call's
	// message (a transport retry of the same call).
	Duplicate bool
	// Scope and IntentID are the key the message was published for: the
	// request's scope ("" for one that names none, the default scope) and
	// its intent id.
	Scope    string
	IntentID string
}

// Send publishes one envelope and waits for the stream's ack. The subject
// is derived from the envelope's scope and intent id; the message id is new, so this is
// a real send even if the same envelope was sent before.
func Send(ctx context.Context, js jetstream.JetStream, envelope []byte) (Sent, error) {
	return SendWithID(ctx, js, envelope, NewMsgID())
}

// NewMsgID returns a message id for one send.
func NewMsgID() string { return "send-" + nuid.Next() }

// SendWithID is Send with the caller's message id. A caller that retries one
// send (for example across a server restart) passes the same id each time,
// so that the stream stores the message once.
func SendWithID(ctx context.Context, js jetstream.JetStream, envelope []byte, msgID string) (Sent, error) {
	return SendWithHeaders(ctx, js, envelope, msgID, nil)
}

// SendWithHeaders is SendWithID with headers of the caller's on the message,
// for a send that must say where it comes from (a redrive of a dead letter
// names the dead letter). The subject and the message id are set as by
// SendWithID; header must not carry a message id of its own.
func SendWithHeaders(ctx context.Context, js jetstream.JetStream, envelope []byte, msgID string, header nats.Header) (Sent, error) {
	id := document.Identify(envelope)
	return SendIntent(ctx, js, id.Scope, id.IntentID, envelope, msgID, header)
}

// SendIntent is SendWithHeaders for a caller that already knows the
// envelope's key: its request's scope ("" when it names none, the default
// scope) and intent id ("" when the envelope names none an executor could
// read, see document.Identify), so the envelope is not read again. The
// subject is that key's approvals subject, approvals.<scope>.<intent>.
func SendIntent(ctx context.Context, js jetstream.JetStream, scope, intentID string, envelope []byte, msgID string, header nats.Header) (Sent, error) {
	s := Sent{Subject: subjects.Approval(scope, intentID), MsgID: msgID, Scope: scope, IntentID: intentID}
	if header.Get(jetstream.MsgIDHeader) != "" {
		return s, errors.New("publish: the message id is the msgID argument, not a header")
	}
	m := nats.NewMsg(s.Subject)
	for k, vs := range header {
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	m.Data = envelope
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(s.MsgID), jetstream.WithExpectStream(topology.ApprovalsStream),
		jetstream.WithRetryAttempts(5))
	if err != nil {
		return s, fmt.Errorf("publish: storing the approval on %s: %w", topology.ApprovalsStream, err)
	}
	s.StreamSeq, s.Duplicate = ack.Sequence, ack.Duplicate
	return s, nil
}
