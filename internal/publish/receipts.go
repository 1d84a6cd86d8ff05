package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ErrNoReceipt is returned when the wait ends before a receipt arrives.
var ErrNoReceipt = errors.New("publish: no receipt yet")

// ErrClosed is returned by a Receipts that was closed.
var ErrClosed = errors.New("publish: the receipts watch is closed")

// Receipt is a receipt with its raw bytes as stored.
type Receipt struct {
	*document.Receipt
	Raw []byte
}

// How often a wait reads the stored receipts when nothing rang: a safety
// net for a receipt whose publication the subscription missed (a reconnect,
// a subscription the server refused). The delay starts at scanFirst and
// doubles up to scanMax.
const (
	scanFirst = 500 * time.Millisecond
	scanMax   = 5 * time.Second
	// storedFirst is the first delay before reading again when the
	// subscription saw the receipt published but the stream has not yet
	// stored it (a stream stores a message moments after its subscribers
	// see it, and an executor's receipt batch only at its commit); it
	// doubles up to the safety net's delay.
	storedFirst = 2 * time.Millisecond
	// requestTimeout bounds one read of a stored receipt.
	requestTimeout = 5 * time.Second
)

// Receipts waits for the receipts of approval messages without creating a
// consumer. For each intent it watches, a core NATS subscription on the
// intent's receipts subject (topology.ReceiptSubject) rings when an
// executor publishes a receipt, and the receipt is then read as the
// RECEIPTS stream stored it, with the JetStream API's message get
// ($JS.API.STREAM.MSG.GET.RECEIPTS, next_by_subj on the intent's subject),
// from where the last read stopped. Only stored receipts are reported: a
// receipt seen on the subscription whose storing failed (a refused batch)
// is never one.
//
// A receipt stored before the watch began is found by the first read of
// each Wait; one published while the subscription was away (a reconnect) by
// the read that follows every reconnect; and the reads repeat, with a
// bounded back-off, for as long as a Wait runs. Watch an intent before
// publishing its message, and the receipt cannot be missed however soon it
// comes.
//
// What it needs from the server: subscribe on receipts.<intent> and publish
// (requests) on $JS.API.STREAM.MSG.GET.RECEIPTS, with replies to the
// connection's inbox. Nothing else: no consumer, no stream info.
//
// A Receipts is safe for concurrent use; Close it to unsubscribe.
type Receipts struct {
	nc     *nats.Conn
	get    string // the message get subject of the RECEIPTS stream
	status chan nats.Status

	mu      sync.Mutex
	closed  bool
	watched map[string]*watched // by receipts subject
}

// watched is the state of one watched receipts subject.
type watched struct {
	subject string
	sub     *nats.Subscription
	reading sync.Mutex // one read of the stored receipts at a time

	// Under Receipts.mu:
	next    uint64              // the next RECEIPTS sequence to read
	rung    map[uint64]struct{} // messages whose receipt was seen published, not yet read stored
	first   map[uint64]result   // per message, the first terminal receipt stored (or why it is unreadable)
	changed chan struct{}       // closed, and replaced, when a wait should read again
}

type result struct {
	r   *Receipt
	err error
}

// NewReceipts returns a watch over the RECEIPTS stream of js's server (its
// API prefix or domain included). Close it when done.
func NewReceipts(js jetstream.JetStream) *Receipts {
	r := &Receipts{nc: js.Conn(), get: apiPrefix(js.Options()) + "STREAM.MSG.GET." + topology.ReceiptsStream,
		watched: map[string]*watched{}}
	r.status = r.nc.StatusChanged(nats.CONNECTED)
	go func() {
		// Receipts published while the subscriptions were away are read
		// after each reconnect. RemoveStatusListener closes the channel.
		for range r.status {
			r.mu.Lock()
			for _, w := range r.watched {
				w.ring()
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// apiPrefix is the JetStream API prefix js sends its requests to.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// ring wakes the waits of w. Receipts.mu is held.
func (w *watched) ring() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Watch subscribes to the receipts of intentID ("" for a message that names
// no intent), unless it is watched already. A message of that intent
// published after Watch returns has its receipt seen when it is published.
func (r *Receipts) Watch(intentID string) error {
	_, err := r.watch(intentID)
	return err
}

func (r *Receipts) watch(intentID string) (*watched, error) {
	subject := topology.ReceiptSubject(intentID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if w := r.watched[subject]; w != nil {
		return w, nil
	}
	w := &watched{subject: subject, next: 1, rung: map[uint64]struct{}{}, first: map[uint64]result{}, changed: make(chan struct{})}
	sub, err := r.nc.Subscribe(subject, func(m *nats.Msg) { r.published(w, m) })
	if err != nil {
		return nil, fmt.Errorf("publish: listening for receipts on %s: %w", subject, err)
	}
	w.sub = sub
	r.watched[subject] = w
	return w, nil
}

// published notes a receipt seen on the subscription: the message it names
// is read from the stream at once, and again until the stream holds it.
func (r *Receipts) published(w *watched, m *nats.Msg) {
	seq, err := strconv.ParseUint(m.Header.Get(topology.HeaderStreamSeq), 10, 64)
	if err != nil {
		return // not a receipt of an approval message
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, done := w.first[seq]; !done {
		w.rung[seq] = struct{}{}
	}
	w.ring()
}

// Close unsubscribes; waits still running end with ErrClosed.
func (r *Receipts) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	for _, w := range r.watched {
		_ = w.sub.Unsubscribe()
		w.ring()
	}
	r.mu.Unlock()
	r.nc.RemoveStatusListener(r.status)
}

// Wait returns the first terminal receipt stored for the approval message
// at streamSeq, published for intentID ("" when the message named none),
// watching the intent first if it is not watched yet. It returns an error
// matching ErrNoReceipt when ctx ends first, and also says why the last
// read of the stored receipts failed, if it did.
func (r *Receipts) Wait(ctx context.Context, intentID string, streamSeq uint64) (*Receipt, error) {
	w, err := r.watch(intentID)
	if err != nil {
		return nil, err
	}
	slow, fast := scanFirst, time.Duration(0)
	timer := time.NewTimer(scanMax)
	timer.Stop()
	defer timer.Stop()
	var readErr error
	for {
		r.mu.Lock()
		changed, closed := w.changed, r.closed
		r.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		readErr = r.read(ctx, w)
		r.mu.Lock()
		res, found := w.first[streamSeq]
		_, unstored := w.rung[streamSeq]
		r.mu.Unlock()
		if found {
			return res.r, res.err
		}
		if readErr != nil && !transient(readErr) {
			if ctx.Err() != nil {
				return nil, noReceipt(streamSeq, ctx.Err(), nil)
			}
			return nil, readErr
		}
		next := slow
		if unstored {
			fast = min(max(2*fast, storedFirst), slow)
			next = fast
		} else {
			fast = 0
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil, noReceipt(streamSeq, ctx.Err(), readErr)
		case <-changed:
		case <-timer.C:
			if !unstored {
				slow = min(2*slow, scanMax)
			}
		}
	}
}

// WaitError is the error of a wait that ended before the receipt. It
// matches ErrNoReceipt and wraps why the wait ended (ctx's error) and, when
// the last read of the stored receipts had failed, that failure.
type WaitError struct {
	StreamSeq uint64
	Err       error
	ReadErr   error
}

func noReceipt(seq uint64, cause, readErr error) error {
	return &WaitError{StreamSeq: seq, Err: cause, ReadErr: readErr}
}

// Cause says why the wait ended, with the last failed read if there was one.
func (e *WaitError) Cause() error {
	if e.ReadErr != nil {
		return fmt.Errorf("%w (the last read of the stored receipts failed: %w)", e.Err, e.ReadErr)
	}
	return e.Err
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%s for stream message %d: %s", ErrNoReceipt, e.StreamSeq, e.Cause())
}

// Unwrap gives ErrNoReceipt, why the wait ended and the failed read.
func (e *WaitError) Unwrap() []error {
	out := []error{ErrNoReceipt, e.Err}
	if e.ReadErr != nil {
		out = append(out, e.ReadErr)
	}
	return out
}

// read reads the receipts stored on w's subject since the last read, and
// notes for each message the first terminal one.
func (r *Receipts) read(ctx context.Context, w *watched) error {
	w.reading.Lock()
	defer w.reading.Unlock()
	for {
		r.mu.Lock()
		from := w.next
		r.mu.Unlock()
		m, err := r.next(ctx, from, w.subject)
		if err != nil || m == nil {
			return err
		}
		r.mu.Lock()
		w.next = m.Sequence + 1
		w.note(m)
		r.mu.Unlock()
	}
}

// note takes one stored receipt into account. Receipts.mu is held.
func (w *watched) note(m *jetstream.RawStreamMsg) {
	seq, err := strconv.ParseUint(m.Header.Get(topology.HeaderStreamSeq), 10, 64)
	if err != nil {
		return // names no approval message: nobody's receipt
	}
	delete(w.rung, seq)
	if _, done := w.first[seq]; done {
		return
	}
	rc, err := document.DecodeReceipt(m.Data)
	switch {
	case err != nil:
		w.first[seq] = result{err: fmt.Errorf("publish: the receipt for message %d (RECEIPTS sequence %d) does not decode: %w", seq, m.Sequence, err)}
	case rc.Delivery.StreamSeq == seq && document.Terminal(rc.Outcome):
		w.first[seq] = result{r: &Receipt{Receipt: rc, Raw: m.Data}}
	}
}

// msgGetRequest and msgGetResponse are the JetStream API's message get, as
// package jetstream sends and decodes it.
type msgGetRequest struct {
	Seq        uint64 `json:"seq"`
	NextBySubj string `json:"next_by_subj"`
}

type msgGetResponse struct {
	Type    string              `json:"type"`
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *storedMsg          `json:"message,omitempty"`
}

type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// errRead marks a read of the stored receipts that may succeed when tried
// again: no answer in time, nobody to answer, the stream's leader away.
var errRead = errors.New("publish: reading stored receipts")

func transient(err error) bool { return errors.Is(err, errRead) }

// next returns the first receipt stored on subject at or after sequence
// from, or nil when there is none.
func (r *Receipts) next(ctx context.Context, from uint64, subject string) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(msgGetRequest{Seq: from, NextBySubj: subject})
	if err != nil {
		return nil, fmt.Errorf("publish: reading stored receipts: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	reply, err := r.nc.RequestWithContext(rctx, r.get, body)
	switch {
	case errors.Is(err, nats.ErrConnectionClosed):
		return nil, fmt.Errorf("publish: reading stored receipts on %s: %w", subject, err)
	case err != nil:
		return nil, fmt.Errorf("%w on %s: %w", errRead, subject, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("publish: reading stored receipts on %s: the answer to %s does not decode: %w", subject, r.get, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil && resp.Error.Code == 503:
		return nil, fmt.Errorf("%w on %s: %w", errRead, subject, resp.Error)
	case resp.Error != nil:
		return nil, fmt.Errorf("publish: reading stored receipts on %s: %w", subject, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("publish: reading stored receipts on %s: %w", subject, jetstream.ErrInvalidJetStreamResponse)
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("publish: reading stored receipts on %s: the headers of RECEIPTS sequence %d: %w", subject, m.Sequence, err)
		}
	}
	if m.Sequence < from || m.Subject != subject {
		return nil, fmt.Errorf("publish: reading stored receipts on %s from sequence %d: the stream answered with %s at %d", subject, from, m.Subject, m.Sequence)
	}
	return m, nil
}

// WaitReceipt returns the first terminal receipt for the approval message
// at streamSeq, published for intentID ("" when the message named none),
// with a Receipts of its own: it reads the receipts of that intent stored
// so far and waits for the next ones. It returns ErrNoReceipt when ctx ends
// first. Where the message is yet to be published, Watch its intent on a
// Receipts first.
func WaitReceipt(ctx context.Context, js jetstream.JetStream, intentID string, streamSeq uint64) (*Receipt, error) {
	r := NewReceipts(js)
	defer r.Close()
	return r.Wait(ctx, intentID, streamSeq)
}
