package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/send"
)

// kept is the approval the console made for one item, kept for the sends
// that follow it.
type kept struct {
	Approval *document.Approval
	Raw      []byte
}

// buildApproval makes the approval of one candidate and one request, as the
// reviewer by approves them, and checks that the gate would accept the three
// documents together. It is the one place where the console makes an
// approval.
func buildApproval(candidate, request []byte, by string, at time.Time, key *sign.Key, lifetime time.Duration) (*kept, error) {
	a, raw, err := approve.Write(candidate, request, approve.Options{By: by, At: at, Key: key, Lifetime: lifetime})
	if err != nil {
		return nil, err
	}
	return &kept{Approval: a, Raw: raw}, nil
}

// Send is one press of the button: the kept approval sent with the files as
// they were at that moment. Exactly one of Refused, Unsendable, Failed and
// Sent says how it went; a published send then waits for its receipt. The
// fields are set before the send is listed; only the receipt state changes
// afterwards, under mu.
type Send struct {
	N          int
	Item       string
	At         time.Time
	ApprovalID string
	// The digests the approval names, and those of the documents sent.
	ApprovedCandidate, ApprovedRequest string
	SentCandidate, SentRequest         string

	// Refused is the local gate's refusal: nothing was published.
	Refused *send.Refusal
	// Unsendable says why the files could not be sent at all (a file is
	// missing or unreadable): nothing was published.
	Unsendable string
	// Failed says why publishing failed.
	Failed string
	// Sent is the published message.
	Sent send.Sent
	// TraceID is the trace of the press that made the send (its span
	// console approve, the parent of the publish's: Sent.TraceID once
	// published); "" when it was not traced.
	TraceID string

	mu      sync.Mutex
	receipt *send.Receipt
	waitErr string
	waiting chan struct{}
	// listener has listened for the receipt since before the publish;
	// the first wait takes it.
	listener *send.Listener
}

// Published reports whether the send reached the APPROVALS stream.
func (s *Send) Published() bool { return s.Sent.StreamSeq != 0 }

// status is a consistent view of a send's receipt state.
type status struct {
	Receipt *send.Receipt
	// Waiting is true while a wait for the receipt runs.
	Waiting bool
	// WaitErr says why the last wait ended without a receipt.
	WaitErr string
}

func (s *Send) status() status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return status{Receipt: s.receipt, Waiting: s.waiting != nil, WaitErr: s.waitErr}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// watch makes sure that a published send without a receipt has a wait
// running, and returns a channel that is closed when that wait ends (at once
// when there is nothing to wait for).
func (c *Console) watch(s *Send) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.receipt != nil || !s.Published() {
		return closedChan
	}
	if s.waiting != nil {
		return s.waiting
	}
	listener := s.listener
	s.listener = nil
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if listener != nil {
			listener.Close()
		}
		return closedChan
	}
	c.wg.Add(1)
	c.mu.Unlock()
	ch := make(chan struct{})
	s.waiting = ch
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Wait)
		defer cancel()
		var r *send.Receipt
		var err error
		if listener != nil {
			r, err = listener.Receipt(ctx, s.Sent)
			listener.Close()
		} else {
			r, err = c.client.WaitReceipt(ctx, s.Sent)
		}
		s.mu.Lock()
		switch {
		case err == nil:
			s.receipt, s.waitErr = r, ""
			c.log.Info("receipt", "item", s.Item, "send", s.N, "stream_seq", s.Sent.StreamSeq, "outcome", r.Outcome)
		case c.ctx.Err() != nil:
			s.waitErr = "the console stopped waiting"
		case ctx.Err() != nil:
			s.waitErr = fmt.Sprintf("no receipt within %s", c.cfg.Wait)
		default:
			s.waitErr = err.Error()
		}
		s.waiting = nil
		s.mu.Unlock()
		close(ch)
	}()
	return ch
}

// errNeedName is the form error when no approver name is given.
var errNeedName = errors.New("enter your name: it is recorded in the approval as approved_by")

// errChangedWhileReviewing is the form error when a file changed between the
// page that was reviewed and the press.
type errChangedWhileReviewing struct{ what string }

func (e errChangedWhileReviewing) Error() string {
	return fmt.Sprintf("the %s changed on disk while you were reviewing it; nothing was approved. Review it again below.", e.what)
}

// send makes the item's approval if there is none yet (by the reviewer by,
// over the documents whose digests the reviewed page showed), then sends the
// kept approval with the files as they are now. A returned error is the
// reviewer's to fix (the form is shown again); everything else, including a
// refusal by the gate or a failed publish, is a Send.
//
// ctx holds the press's span, which the publish continues (its
// cancellation is not the publish's: see attempt).
func (c *Console) send(ctx context.Context, name, by, sawCandidate, sawRequest string) (*Send, error) {
	it, err := findItem(c.cfg.Dir, name)
	if err != nil {
		return nil, err
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() && it.Request != nil {
		span.SetAttributes(tracing.IntentID.String(it.Request.IntentID), tracing.Scope.String(it.Request.KeyScope()),
			tracing.Destination.String(it.Request.DestinationName()))
	}
	k, err := c.approval(it, by, sawCandidate, sawRequest)
	if err != nil {
		return nil, err
	}
	s := &Send{
		Item:              name,
		At:                c.cfg.Clock(),
		ApprovalID:        k.Approval.ApprovalID,
		ApprovedCandidate: k.Approval.Candidate.Digest,
		ApprovedRequest:   k.Approval.Request.Digest,
		TraceID:           tracing.TraceID(ctx),
	}
	c.attempt(trace.ContextWithSpan(c.ctx, span), s, it, k)
	c.mu.Lock()
	c.sends = append(c.sends, s)
	s.N = len(c.sends)
	c.mu.Unlock()
	switch {
	case s.Refused != nil:
		c.log.InfoContext(ctx, "not sent: the gate refused", "item", name, "send", s.N, "check", s.Refused.Check, "path", s.Refused.Path)
		tracing.Fail(span, s.Refused)
		if span.IsRecording() {
			span.SetAttributes(tracing.Check.String(s.Refused.Check))
		}
	case s.Unsendable != "" || s.Failed != "":
		c.log.WarnContext(ctx, "not sent", "item", name, "send", s.N, "err", firstNonEmpty(s.Unsendable, s.Failed))
		tracing.Fail(span, errors.New(firstNonEmpty(s.Unsendable, s.Failed)))
	default:
		c.log.InfoContext(ctx, "published", "item", name, "send", s.N, "stream_seq", s.Sent.StreamSeq, "msg_id", s.Sent.MsgID, "intent_id", s.Sent.IntentID)
		c.watch(s)
	}
	return s, nil
}

// approval returns the item's kept approval, making it first when there is
// none.
func (c *Console) approval(it *Item, by, sawCandidate, sawRequest string) (*kept, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.approvals[it.Name]; k != nil {
		return k, nil
	}
	switch {
	case !it.Approvable():
		return nil, fmt.Errorf("this request cannot be approved: %s", firstNonEmpty(it.Err, it.Mismatch))
	case by == "":
		return nil, errNeedName
	case !validLabel(by):
		return nil, fmt.Errorf("the name must be at most %d bytes of text", document.MaxIDBytes)
	case c.cfg.KeyOwner != "" && by != c.cfg.KeyOwner:
		return nil, fmt.Errorf("this console signs with the key of %q (key %s), so an approval it makes must name %q: executors refuse an approval whose approved_by is not its signing key's name. Nothing was approved",
			c.cfg.KeyOwner, c.cfg.Key.ID, c.cfg.KeyOwner)
	case sawCandidate != it.CandidateDigest:
		return nil, errChangedWhileReviewing{"candidate"}
	case sawRequest != it.RequestDigest:
		return nil, errChangedWhileReviewing{"request"}
	}
	k, err := buildApproval(it.CandidateRaw, it.RequestRaw, by, c.cfg.Clock(), c.cfg.Key, c.cfg.Lifetime)
	if err != nil {
		return nil, err
	}
	c.approvals[it.Name] = k
	c.log.Info("approved", "item", it.Name, "approval_id", k.Approval.ApprovalID, "approved_by", by)
	return k, nil
}

// attempt runs the gate on the kept approval with the item's files and, if
// it passes, publishes them; it fills in how that went. ctx is the
// console's own, holding the press's span.
func (c *Console) attempt(ctx context.Context, s *Send, it *Item, k *kept) {
	if !it.Sendable() {
		s.Unsendable = it.Err
		return
	}
	s.SentCandidate, _ = canon.Digest(it.CandidateRaw)
	s.SentRequest, _ = canon.Digest(it.RequestRaw)
	env, err := send.Build(send.Documents{Candidate: it.CandidateRaw, Request: it.RequestRaw, Approval: k.Raw})
	if err != nil {
		s.Unsendable = err.Error()
		return
	}
	if err := c.check(env, k); err != nil {
		var refused *send.Refusal
		if !errors.As(err, &refused) {
			refused = &send.Refusal{Check: send.CheckEnvelope, Path: "$", Reason: err.Error()}
		}
		s.Refused = refused
		return
	}
	// Listen for the receipt before publishing, so that it is not missed
	// however soon it comes.
	l, err := c.client.Listen(env)
	if err != nil {
		s.Failed = err.Error()
		return
	}
	// The publish belongs to the console, not to the browser's request: it
	// completes even if the browser goes away.
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	sent, err := c.client.Publish(ctx, env)
	if err != nil {
		l.Close()
		s.Failed = err.Error()
		return
	}
	s.Sent, s.listener = sent, l
}

// check runs the gate on the message about to be sent. With the trusted
// approvers it runs every check an executor runs; without them, the checks
// that need no keys, and the approval's not_after against the clock (the
// gate's expiry check judges that at the time the stream stores the
// message, moments later).
func (c *Console) check(env *send.Envelope, k *kept) error {
	if c.cfg.Trusted != nil {
		_, err := send.Trusted(c.cfg.Trusted).At(c.cfg.Clock).Envelope(env)
		return err
	}
	if k.expired(c.cfg.Clock()) {
		return &send.Refusal{Check: send.CheckExpiry, Path: "$.approval.not_after",
			Reason: fmt.Sprintf("the approval expired at %s; ask the reviewer to approve again", k.Approval.NotAfter)}
	}
	_, err := send.Bindings().Envelope(env)
	return err
}

// expired reports whether the kept approval's not_after has passed.
func (k *kept) expired(now time.Time) bool {
	if k.Approval.NotAfter == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339, k.Approval.NotAfter)
	return err == nil && now.After(t)
}

// validLabel reports whether by is an acceptable approved_by: valid UTF-8 of
// at most MaxIDBytes bytes without control characters.
func validLabel(by string) bool {
	if len(by) > document.MaxIDBytes {
		return false
	}
	for _, r := range by {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}

// discard forgets the item's kept approval, so that it can be reviewed and
// approved afresh. Its sends stay listed.
func (c *Console) discard(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.approvals[name]; k != nil {
		c.log.Info("approval discarded", "item", name, "approval_id", k.Approval.ApprovalID)
	}
	delete(c.approvals, name)
}

// itemState returns the item's kept approval and its sends, newest first.
func (c *Console) itemState(name string) (*kept, []*Send) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Send
	for i := len(c.sends) - 1; i >= 0; i-- {
		if c.sends[i].Item == name {
			out = append(out, c.sends[i])
		}
	}
	return c.approvals[name], out
}

// sendByN returns send n of the item.
func (c *Console) sendByN(name string, n int) *Send {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 1 || n > len(c.sends) || c.sends[n-1].Item != name {
		return nil
	}
	return c.sends[n-1]
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
