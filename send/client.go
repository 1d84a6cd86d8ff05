package send

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/publish"
)

// ErrNoReceipt is matched by every error of a wait for the receipt of a
// message that was published: the wait ran out, the connection stayed
// lost, the stored receipts could not be read. The error wraps the cause.
// The message is stored and an executor may still be working on it;
// sending again is safe.
var ErrNoReceipt = errors.New("send: no receipt yet")

// Outcome is what a receipt says happened to a message.
type Outcome string

// The outcomes of a receipt.
const (
	// Created: the task service created the task.
	Created Outcome = document.OutcomeCreated
	// Replayed: the intent was created before; the task service returned
	// the first task and created nothing.
	Replayed Outcome = document.OutcomeReplayed
	// Conflict: the intent was created before from different content;
	// nothing was created or changed.
	Conflict Outcome = document.OutcomeConflict
	// Rejected: an executor's gate refused the message (Receipt.Rejection);
	// the task service never heard of it.
	Rejected Outcome = document.OutcomeRejected
	// DeadLettered: the message kept failing (Receipt.Failure). Whether the
	// task was created is unknown; sending the same approval again is safe
	// and will say Created or Replayed.
	DeadLettered Outcome = document.OutcomeDeadLettered
)

// Sent is one published message.
type Sent struct {
	Subject   string
	MsgID     string
	StreamSeq uint64
	// Duplicate is true when the stream had already stored this call's
	// message (a transport retry of the same call).
	Duplicate bool
	// Scope and IntentID are the key the message was published for (Scope
	// "" is the default scope); its receipts are published on
	// receipts.<scope>.<intent>.
	Scope    string
	IntentID string
}

// Receipt is an executor's task-receipt.v1 for one message. Members that
// are null in the document are empty strings and nil pointers here.
type Receipt struct {
	ReceiptID string
	Outcome   Outcome
	IntentID  string
	// Scope is the caller scope in which the intent id is a key ("default"
	// for a request that names none); empty when the receipt names none (its
	// request could not be read, or it was issued before keys had scopes).
	Scope      string
	RequestID  string
	ApprovalID string
	TaskID     string
	// TaskDeleted, on a Replayed receipt, says that the task was deleted
	// (by its owner) after it was created: nothing was created again.
	TaskDeleted bool
	// Rejection is set for Rejected, Failure for DeadLettered.
	Rejection *Rejection
	Failure   *Failure
	// Counts are the task service's counters as of the call; nil when it
	// was not called.
	Counts *Counts
	// StoreID names the task service's store that answered.
	StoreID  string
	Delivery Delivery
	IssuedAt string
	// Raw is the receipt document as stored.
	Raw []byte
}

// Rejection names the gate check that stopped a message.
type Rejection struct {
	Check, Path, Reason string
}

// Failure says why a message was dead-lettered.
type Failure struct {
	Reason   string
	Attempts int64
}

// NothingCreated reports whether the dead letter says that its task service
// refused the call knowing that it created nothing (a UID clash, a resource
// that is not the adapter's): a resend is refused the same way until the
// cause is fixed, so it cannot tell more than this receipt.
func (f *Failure) NothingCreated() bool {
	return f != nil && strings.HasSuffix(f.Reason, document.DeadLetterNothingCreated)
}

// Counts are the task service's three counters.
type Counts struct {
	RequestsReceived int64
	CreatesExecuted  int64
	TasksExisting    int64
}

// Delivery says which delivery of which stream message a receipt is for.
type Delivery struct {
	StreamSeq uint64
	Delivered uint64
	Attempt   string
	Executor  string
	StoredAt  string
}

// Client publishes envelopes onto the APPROVALS stream and reads their
// receipts from the RECEIPTS stream.
type Client struct {
	js jetstream.JetStream
}

// NewClient returns a client over js (jetstream.New of a connection).
func NewClient(js jetstream.JetStream) *Client { return &Client{js: js} }

// Publish stores the envelope on the APPROVALS stream under its intent's
// subject, with a message id of its own, and returns once the stream
// acknowledged it. Every call is a real send: the same envelope published
// again reaches the task service again.
func (c *Client) Publish(ctx context.Context, e *Envelope) (Sent, error) {
	s, err := publish.SendIntent(ctx, c.js, e.Scope(), e.IntentID(), e.data, publish.NewMsgID(), nil)
	if err != nil {
		return Sent{}, err
	}
	return Sent{Subject: s.Subject, MsgID: s.MsgID, StreamSeq: s.StreamSeq, Duplicate: s.Duplicate, Scope: s.Scope, IntentID: s.IntentID}, nil
}

// WaitReceipt returns the first terminal receipt for the sent message,
// also one stored before the wait began. Every error it returns matches
// ErrNoReceipt (the message is stored; sending again is safe) and wraps
// the cause: ctx's error when ctx ends first. It creates no consumer (see
// Listener).
func (c *Client) WaitReceipt(ctx context.Context, s Sent) (*Receipt, error) {
	w := publish.NewReceipts(c.js)
	defer w.Close()
	return wait(ctx, w, s)
}

// wait waits on w for s's receipt.
func wait(ctx context.Context, w *publish.Receipts, s Sent) (*Receipt, error) {
	r, err := w.Wait(ctx, s.Scope, s.IntentID, s.StreamSeq)
	var ended *publish.WaitError
	switch {
	case errors.As(err, &ended):
		return nil, fmt.Errorf("%w for stream message %d: %w", ErrNoReceipt, s.StreamSeq, ended.Cause())
	case err != nil:
		return nil, fmt.Errorf("%w for stream message %d: %w", ErrNoReceipt, s.StreamSeq, err)
	}
	return receipt(r), nil
}

// Listener listens for the receipts of one key's messages (its scope and
// intent id), from before they are published: a receipt that arrives
// however soon after the publish is not missed, and one stored earlier is
// read from the stream. It creates no consumer: it subscribes to the key's
// receipts subject (receipts.<scope>.<intent>) and reads stored receipts
// through the JetStream API's direct get of the last message on that
// subject ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>), so
// that a caller's permissions may confine it to its own scope. Close it
// when done.
type Listener struct {
	w *publish.Receipts
}

// Listen starts listening for the receipts of e's key. Publish e after it
// and wait with Listener.Receipt; Send does all three.
func (c *Client) Listen(e *Envelope) (*Listener, error) {
	w := publish.NewReceipts(c.js)
	if err := w.Watch(e.Scope(), e.IntentID()); err != nil {
		w.Close()
		return nil, fmt.Errorf("send: %w", err)
	}
	return &Listener{w: w}, nil
}

// Receipt returns the first terminal receipt for the sent message, as
// WaitReceipt does; it may be called again after a wait that ended without
// one. Every error it returns matches ErrNoReceipt.
func (l *Listener) Receipt(ctx context.Context, s Sent) (*Receipt, error) {
	return wait(ctx, l.w, s)
}

// Close stops listening; a Receipt still waiting ends with ErrNoReceipt.
func (l *Listener) Close() { l.w.Close() }

// Send listens for the envelope's receipts, publishes it and waits, until
// ctx ends, for its receipt. An error that matches ErrNoReceipt comes after
// the message was published (Sent says which); any other means it was not,
// or not for certain.
func (c *Client) Send(ctx context.Context, e *Envelope) (Sent, *Receipt, error) {
	l, err := c.Listen(e)
	if err != nil {
		return Sent{}, nil, fmt.Errorf("nothing published: %w", err)
	}
	defer l.Close()
	s, err := c.Publish(ctx, e)
	if err != nil {
		return s, nil, err
	}
	r, err := l.Receipt(ctx, s)
	return s, r, err
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ParseReceipt reads a task-receipt.v1 document strictly, as the commands
// do.
func ParseReceipt(data []byte) (*Receipt, error) {
	r, err := document.DecodeReceipt(data)
	if err != nil {
		return nil, err
	}
	return receipt(&publish.Receipt{Receipt: r, Raw: append([]byte(nil), data...)}), nil
}

func receipt(p *publish.Receipt) *Receipt {
	r := p.Receipt
	out := &Receipt{
		ReceiptID: r.ReceiptID, Outcome: Outcome(r.Outcome),
		IntentID: str(r.IntentID), Scope: r.Scope, RequestID: str(r.RequestID), ApprovalID: str(r.ApprovalID), TaskID: str(r.TaskID),
		TaskDeleted: r.TaskDeleted, StoreID: str(r.StoreID), IssuedAt: r.IssuedAt, Raw: p.Raw,
		Delivery: Delivery{StreamSeq: r.Delivery.StreamSeq, Delivered: r.Delivery.Delivered, Attempt: r.Delivery.Attempt,
			Executor: r.Delivery.Executor, StoredAt: r.Delivery.StoredAt},
	}
	if r.Rejection != nil {
		out.Rejection = &Rejection{Check: r.Rejection.Check, Path: r.Rejection.Path, Reason: r.Rejection.Reason}
	}
	if r.Failure != nil {
		out.Failure = &Failure{Reason: r.Failure.Reason, Attempts: r.Failure.Attempts}
	}
	if r.Counts != nil {
		out.Counts = &Counts{RequestsReceived: r.Counts.RequestsReceived, CreatesExecuted: r.Counts.CreatesExecuted, TasksExisting: r.Counts.TasksExisting}
	}
	return out
}
