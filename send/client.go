package send

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

var (
	// ErrNoReceipt is matched by every error of a wait for the receipt of
	// a message that was published: the wait ran out, the connection stayed
	// lost, the stored receipts could not be read. The error is a
	// *NoReceiptError, which wraps the cause. The message is stored and an
	// executor may still be working on it; sending again is safe.
	ErrNoReceipt = errors.New("send: no receipt yet")
	// ErrNotPublished is matched by the error of a Publish (or Send) that
	// the stream did not acknowledge: the message may or may not be stored.
	// Publishing it again under the same MsgID stores it at most once.
	ErrNotPublished = errors.New("send: not acknowledged by the stream")
	// ErrBadReceipt is matched by the error of ParseReceipt for data that
	// is not a task-receipt.v1 document, and of a wait whose receipt does
	// not decode.
	ErrBadReceipt = errors.New("send: not a task-receipt.v1 document")
)

// Outcome is what a receipt says happened to a message: one of the task
// service's outcomes (taskservice.Outcome) or one of the executor's own,
// Rejected and DeadLettered.
type Outcome = taskservice.Outcome

// The outcomes of a receipt.
const (
	// Created: the task service created the task.
	Created = taskservice.Created
	// Replayed: the intent was created before; the task service returned
	// the first task and created nothing.
	Replayed = taskservice.Replayed
	// Conflict: the intent was created before from different content;
	// nothing was created or changed.
	Conflict = taskservice.Conflict
	// Rejected: an executor's gate refused the message (Receipt.Rejection);
	// the task service never heard of it.
	Rejected Outcome = "rejected"
	// DeadLettered: the message kept failing, or the task service refused
	// it for good (Receipt.Failure). When Failure.OutcomeUnknown, whether
	// the task was created is unknown, and sending the same approval again
	// is safe and will say Created or Replayed; otherwise a resend is
	// refused the same way until the cause the reason names is fixed.
	DeadLettered Outcome = "dead_lettered"
	// InDoubt: the task service refused to call because an earlier call
	// for the key may still land (Receipt.DecidedAfter says until when);
	// the message is delivered again after that time. It ends nothing: a
	// wait for a message's receipt passes over it and returns the receipt
	// that follows, or, when the wait ends first, a NoReceiptError whose
	// InDoubtUntil says until when.
	InDoubt Outcome = "in_doubt"
)

// Sent is one published message.
type Sent struct {
	Subject string
	MsgID   string
	// StreamSeq is the message's APPROVALS sequence, also for a tenant
	// whose intake stream stored it first (deploy/auth).
	StreamSeq uint64
	// Duplicate is true when the stream had already stored a message with
	// this MsgID (a retry of the same publish): StreamSeq is that message,
	// and nothing new was stored.
	Duplicate bool
	// Scope and IntentID are the key the message was published for (Scope
	// "" is the default scope); its receipts are published on
	// receipts.<scope>.<intent>.
	Scope    string
	IntentID string
	// TraceID is the OpenTelemetry trace the publish belongs to, 32 hex
	// digits: the trace of the caller's ctx when it holds a span, else a
	// new one. "" when the publish was not traced (no tracer provider is
	// set, or the trace was not sampled). Its span, send <subject>, is
	// carried to the executors in the message's traceparent header.
	TraceID string
}

// Receipt is an executor's task-receipt.v1 for one message. Members that
// are null in the document are empty strings, zero times and nil pointers
// here.
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
	StoreID string
	// Note is what the task service said more about the outcome (why a
	// conflict is one, which resource it found and left alone); empty
	// when it said nothing more.
	Note string
	// DecidedAfter, on an InDoubt receipt, is when the key stops being in
	// doubt; zero on every other outcome.
	DecidedAfter time.Time
	// TraceID is the id of the trace the executor handled the delivery in
	// (32 hex digits), "" when it was not traced.
	TraceID  string
	Delivery Delivery
	// IssuedAt is when the executor issued the receipt.
	IssuedAt time.Time
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

// OutcomeUnknown reports whether the dead letter says that whether its task
// was created is unknown (deliveries or retries ran out): only then is
// sending the same approval again safe, and it will say which. A dead
// letter the task service refused for good is not.
func (f *Failure) OutcomeUnknown() bool {
	return f != nil && strings.HasSuffix(f.Reason, document.DeadLetterUnknownOutcome)
}

// NothingCreated reports whether the dead letter says that its task service
// refused the call knowing that it created nothing (a UID clash, a resource
// that is not the adapter's): a resend is refused the same way until the
// cause is fixed, so it cannot tell more than this receipt.
func (f *Failure) NothingCreated() bool {
	return f != nil && strings.HasSuffix(f.Reason, document.DeadLetterNothingCreated)
}

// Counts are the task service's three counters (taskservice.Counts):
// RequestsReceived, CreatesExecuted and TasksExisting.
type Counts = taskservice.Counts

// Delivery says which delivery of which stream message a receipt is for.
type Delivery struct {
	StreamSeq uint64
	Delivered uint64
	Attempt   string
	Executor  string
	// StoredAt is when the APPROVALS stream stored the message; zero on
	// receipts issued before it was recorded.
	StoredAt time.Time
}

// Client publishes envelopes onto the APPROVALS stream and reads their
// receipts from the RECEIPTS stream.
type Client struct {
	js  jetstream.JetStream
	ids usedIDs
}

// NewClient returns a client over js (jetstream.New of a connection).
func NewClient(js jetstream.JetStream) *Client { return &Client{js: js} }

// usedIDs remembers which envelope each message id of a client's recent
// publishes was for (by its SHA-256), for the stream's default duplicate
// window and at most maxUsedIDs ids, so that an id given again for another
// envelope is refused before anything is published.
type usedIDs struct {
	mu    sync.Mutex
	byID  map[string]usedID
	order []string // ids, oldest first
}

type usedID struct {
	sum [sha256.Size]byte
	at  time.Time
}

const maxUsedIDs = 1 << 16

// claim records that id is published for e, or refuses it with ErrOption
// when the client published it for another envelope within the window.
func (u *usedIDs) claim(id string, e *Envelope) error {
	sum, now := sha256.Sum256(e.data), time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.order) > 0 {
		first, ok := u.byID[u.order[0]]
		if ok && now.Sub(first.at) < duplicateWindow && len(u.order) < maxUsedIDs {
			break
		}
		delete(u.byID, u.order[0])
		u.order = u.order[1:]
	}
	if prev, ok := u.byID[id]; ok {
		if prev.sum != sum {
			return fmt.Errorf("%w: message id %q was used for another envelope: one id names one envelope (NewMsgID makes a new one)", ErrOption, id)
		}
		return nil
	}
	if u.byID == nil {
		u.byID = map[string]usedID{}
	}
	u.byID[id] = usedID{sum: sum, at: now}
	u.order = append(u.order, id)
	return nil
}

// duplicateWindow is how long the APPROVALS stream remembers a message id
// by default (topology's DuplicateWindow).
var duplicateWindow = topology.DefaultConfig().DuplicateWindow

// Publish stores the envelope on the APPROVALS stream under its key's
// subject, with a message id of its own unless MsgID gives one, and
// returns once the stream acknowledged it (a tenant's: once its intake
// stream acknowledged it and APPROVALS holds the copy it sourced). Every call with a new message id
// is a real send: the same envelope published again reaches the task
// service again. Header adds headers; Deadline bounds the call. An error
// that matches ErrNotPublished leaves it unknown whether the stream stored
// the message; one that matches ErrOption means nothing was published.
func (c *Client) Publish(ctx context.Context, e *Envelope, opts ...Option) (Sent, error) {
	o, err := c.options(e, opts)
	if err != nil {
		return Sent{}, err
	}
	ctx, cancel := o.within(ctx)
	defer cancel()
	return c.publish(ctx, e, o)
}

// options reads opts for one publish of e: its message id must not be one
// the client used for another envelope.
func (c *Client) options(e *Envelope, opts []Option) (options, error) {
	o, err := apply(opts)
	if err != nil {
		return o, err
	}
	return o, c.ids.claim(o.msgID, e)
}

func (c *Client) publish(ctx context.Context, e *Envelope, o options) (Sent, error) {
	s, err := publishKey(ctx, c.js, e.scope, e.intentID, e.data, o)
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return s, fmt.Errorf("%w: storing the approval on %s: the stream refuses the message of %d bytes and its headers as larger than any valid envelope (at most %d bytes, with %d for headers): %w",
			ErrNotPublished, topology.ApprovalsStream, len(e.data), topology.MaxEnvelopeBytes, topology.HeaderAllowance, err)
	case errors.As(err, &api) && (strings.Contains(api.Description, "maximum bytes exceeded") || strings.Contains(api.Description, "maximum messages exceeded")):
		return s, fmt.Errorf("%w: storing the approval on %s: the stream is full: a tenant's intake stream holds at most its bound (executor provision --tenant-max-bytes, one approval counting 1 KiB at least), %s at most --max-bytes, and refuses new approvals until older ones age out: %w",
			ErrNotPublished, topology.ApprovalsStream, topology.ApprovalsStream, err)
	case err != nil:
		return s, fmt.Errorf("%w: storing the approval on %s: %w", ErrNotPublished, topology.ApprovalsStream, err)
	}
	return s, nil
}

// WaitReceipt returns the first terminal receipt for the sent message,
// also one stored before the wait began. Every error it returns matches
// ErrNoReceipt (the message is stored; sending again is safe) and wraps
// the cause: ctx's error when ctx ends first. It creates no consumer (see
// Listener).
func (c *Client) WaitReceipt(ctx context.Context, s Sent) (*Receipt, error) {
	l := c.NewListener()
	defer l.Close()
	return l.Receipt(ctx, s)
}

// Listener listens for the receipts of the messages of one or more keys
// (a scope and an intent id each), from before they are published: a
// receipt that arrives however soon after the publish is not missed, and
// one stored earlier is read from the stream. One listener serves any
// number of messages and waits. It creates no consumer: it subscribes to
// each key's receipts subject (receipts.<scope>.<intent>) and reads stored
// receipts through the JetStream API's direct get of the last message on
// that subject ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>), so
// that a caller's permissions may confine it to its own scope. A Listener
// is safe for concurrent use; Close it when done.
type Listener struct {
	w *receiptWatch
}

// NewListener returns a listener that listens for no key yet: Watch each
// envelope before publishing it.
func (c *Client) NewListener() *Listener {
	return &Listener{w: newReceiptWatch(c.js)}
}

// Listen starts listening for the receipts of e's key. Publish e after it
// and wait with Listener.Receipt; Send does all three.
func (c *Client) Listen(e *Envelope) (*Listener, error) {
	l := c.NewListener()
	if err := l.Watch(e); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Watch listens for the receipts of e's key too; it does nothing if the
// key is listened for already.
func (l *Listener) Watch(e *Envelope) error { return l.WatchKey(e.scope, e.intentID) }

// WatchKey listens for the receipts of the key (scope, intentID), as Watch
// does for an envelope's, for a caller that knows the key of a message
// published elsewhere (Sent.Scope and Sent.IntentID). Scope "" is the
// default scope.
func (l *Listener) WatchKey(scope, intentID string) error {
	if err := l.w.Watch(scope, intentID); err != nil {
		return fmt.Errorf("send: listening for receipts: %w", err)
	}
	return nil
}

// Receipt returns the first terminal receipt for the sent message, as
// WaitReceipt does; it may be called again after a wait that ended without
// one, and for any message (its key is listened for from this call on if
// it was not watched). Every error it returns matches ErrNoReceipt.
func (l *Listener) Receipt(ctx context.Context, s Sent) (*Receipt, error) {
	r, err := l.w.Wait(ctx, s.Scope, s.IntentID, s.StreamSeq)
	var ended *NoReceiptError
	switch {
	case errors.As(err, &ended):
		return nil, err
	case err != nil:
		return nil, noReceipt(s.StreamSeq, err, nil)
	}
	out, err := receipt(r)
	if err != nil { // its times do not parse (ErrBadReceipt)
		return nil, noReceipt(s.StreamSeq, err, nil)
	}
	return out, nil
}

// Close stops listening; a Receipt still waiting ends with ErrNoReceipt.
func (l *Listener) Close() { l.w.Close() }

// Send listens for the envelope's receipts, publishes it and waits, until
// ctx ends (or the Deadline option's time), for its receipt. An error that
// matches ErrNoReceipt comes after the message was published (Sent says
// which); any other means it was not, or not for certain
// (ErrNotPublished).
func (c *Client) Send(ctx context.Context, e *Envelope, opts ...Option) (Sent, *Receipt, error) {
	o, err := c.options(e, opts)
	if err != nil {
		return Sent{}, nil, err
	}
	ctx, cancel := o.within(ctx)
	defer cancel()
	l, err := c.Listen(e)
	if err != nil {
		return Sent{}, nil, fmt.Errorf("%w: nothing published", err)
	}
	defer l.Close()
	s, err := c.publish(ctx, e, o)
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
// do. Its errors match ErrBadReceipt.
func ParseReceipt(data []byte) (*Receipt, error) {
	r, err := document.DecodeReceipt(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadReceipt, err)
	}
	return receipt(&storedReceipt{Receipt: r, Raw: append([]byte(nil), data...)})
}

// receipt is the public form of a decoded receipt; its times must parse.
func receipt(p *storedReceipt) (*Receipt, error) {
	r := p.Receipt
	out := &Receipt{
		ReceiptID: r.ReceiptID, Outcome: Outcome(r.Outcome),
		IntentID: str(r.IntentID), Scope: r.Scope, RequestID: str(r.RequestID), ApprovalID: str(r.ApprovalID), TaskID: str(r.TaskID),
		TaskDeleted: r.TaskDeleted, StoreID: str(r.StoreID), Note: r.Note, TraceID: r.TraceID, Raw: p.Raw, Counts: r.Counts,
		Delivery: Delivery{StreamSeq: r.Delivery.StreamSeq, Delivered: r.Delivery.Delivered, Attempt: r.Delivery.Attempt,
			Executor: r.Delivery.Executor},
	}
	var err error
	if out.IssuedAt, err = parseTime(r.IssuedAt); err != nil {
		return nil, fmt.Errorf("%w: issued_at: %s", ErrBadReceipt, err)
	}
	if out.Delivery.StoredAt, err = parseTime(r.Delivery.StoredAt); err != nil {
		return nil, fmt.Errorf("%w: delivery.stored_at: %s", ErrBadReceipt, err)
	}
	if out.DecidedAfter, err = parseTime(r.DecidedAfter); err != nil {
		return nil, fmt.Errorf("%w: decided_after: %s", ErrBadReceipt, err)
	}
	if r.Rejection != nil {
		out.Rejection = &Rejection{Check: r.Rejection.Check, Path: r.Rejection.Path, Reason: r.Rejection.Reason}
	}
	if r.Failure != nil {
		out.Failure = &Failure{Reason: r.Failure.Reason, Attempts: r.Failure.Attempts}
	}
	return out, nil
}

// parseTime reads an RFC 3339 time; "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
