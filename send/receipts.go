package send

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// errClosed is why a wait on a closed listener ended.
var errClosed = errors.New("the listener is closed")

// storedReceipt is a receipt with its raw bytes as stored.
type storedReceipt struct {
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
	// hiddenAfter is how long a receipt seen published may stay unread
	// stored, with the last stored receipt of its key naming an earlier
	// message, before a scan looks for it: until then it is most likely
	// not stored yet (its batch not committed), which a scan cannot cure,
	// and a scan costs a permission violation where the credentials allow
	// no message get.
	hiddenAfter = 2 * time.Second
	// requestTimeout bounds one read of a stored receipt.
	requestTimeout = 5 * time.Second
)

// receiptWatch waits for the receipts of approval messages without creating a
// consumer. For each key (scope, intent) it watches, a core NATS
// subscription on the key's receipts subject (subjects.Receipt,
// receipts.<scope>.<intent>) rings when an executor publishes a receipt,
// and the receipt is then read as the RECEIPTS stream stored it, with the
// JetStream API's direct get of the last message on that subject
// ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>). The subject
// read is in the API subject, not in a request body, so that a permission
// on $JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.> confines a caller to
// its own scope's receipts. Only stored receipts are reported: a receipt
// seen on the subscription whose storing failed (a refused batch) is never
// one.
//
// A direct get by subject reads only the last receipt of a key. A receipt
// that a later receipt of the same key hides before any read saw it is
// still reported when the wait saw it published in the same atomic batch
// as a receipt read stored (a batch is stored whole or not at all); a
// receipt stored alone and hidden by another of its key (two sends of one
// key whose receipts are stored at once, or a late wait) is found by a
// scan of the key's stored receipts with the stream's message get
// (next_by_subj), where the credentials allow it; a tenant's do not (the
// message get names its subject in the request body, which no permission
// confines), and for a tenant such a wait ends with ErrNoReceipt.
//
// A receipt stored before the watch began is found by the first read of
// each Wait (if it is still the last of its key); one published while the
// subscription was away (a reconnect) by the read that follows every
// reconnect; and the reads repeat, with a bounded back-off, for as long as
// a Wait runs. Watch a key before publishing its message, and the receipt
// cannot be missed however soon it comes.
//
// What it needs from the server: subscribe on receipts.<scope>.<intent>
// and publish (requests) on
// $JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>, with replies to
// the connection's inbox. Nothing else: no consumer, no stream info. The
// RECEIPTS stream must allow direct gets (topology provisions it so).
//
// A receiptWatch is safe for concurrent use; Close it to unsubscribe.
type receiptWatch struct {
	nc     *nats.Conn
	get    string           // the direct get subject of the RECEIPTS stream, without the subject read
	msgGet storedmsg.Getter // the message get of the RECEIPTS stream
	status chan nats.Status
	// noScan is set once a message get failed: these credentials may read
	// the last receipt of a key only (a tenant's), or the stream does not
	// answer it; the direct get alone is used from then on.
	noScan atomic.Bool

	mu      sync.Mutex
	closed  bool
	watched map[string]*watched // by receipts subject
}

// watched is the state of one watched receipts subject.
type watched struct {
	subject string
	sub     *nats.Subscription
	reading sync.Mutex // one read of the stored receipts at a time
	next    uint64     // the RECEIPTS sequence a scan goes on from (under reading)

	// Under receiptWatch.mu:
	rung    map[uint64]time.Time // messages whose receipt was seen published, not yet read stored: when first seen
	live    []liveCopy           // receipts seen published and not yet known stored, oldest first
	batches map[string]struct{}  // atomic batches known stored
	first   map[uint64]result    // per message, the first terminal receipt stored (or why it is unreadable)
	inDoubt map[uint64]string    // per message, the decided_after of the last in_doubt receipt read stored
	changed chan struct{}        // closed, and replaced, when a wait should read again
}

// liveCopy is a receipt as the subscription saw it published.
type liveCopy struct {
	seq   uint64 // the approval message it names
	batch string // its atomic batch, "" when published alone
	data  []byte
}

// maxLive bounds the receipts of one key kept as seen published.
const maxLive = 1024

type result struct {
	r   *storedReceipt
	err error
}

// newReceiptWatch returns a watch over the RECEIPTS stream of js's server (its
// API prefix or domain included). Close it when done.
func newReceiptWatch(js jetstream.JetStream) *receiptWatch {
	r := &receiptWatch{nc: js.Conn(), get: storedmsg.APIPrefix(js) + "DIRECT.GET." + topology.ReceiptsStream,
		msgGet: storedmsg.NewGetter(js, topology.ReceiptsStream), watched: map[string]*watched{}}
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

// ring wakes the waits of w. receiptWatch.mu is held.
func (w *watched) ring() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Watch subscribes to the receipts of the key (scope, intentID): scope ""
// is the default scope, intentID "" a message that names no intent. It
// does nothing if the key is watched already. A message of that key
// published after Watch returns, on the watch's own connection, has its
// receipt seen when it is published; one published on another connection
// is ordered after the subscription only by a round trip (Flush) on the
// watch's connection.
func (r *receiptWatch) Watch(scope, intentID string) error {
	_, err := r.watch(scope, intentID)
	return err
}

func (r *receiptWatch) watch(scope, intentID string) (*watched, error) {
	subject := subjects.Receipt(scope, intentID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if w := r.watched[subject]; w != nil {
		return w, nil
	}
	w := &watched{subject: subject, rung: map[uint64]time.Time{}, batches: map[string]struct{}{},
		first: map[uint64]result{}, changed: make(chan struct{})}
	sub, err := r.nc.Subscribe(subject, func(m *nats.Msg) { r.published(w, m) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	w.sub = sub
	r.watched[subject] = w
	return w, nil
}

// published notes a receipt seen on the subscription: the message it names
// is read from the stream at once, and again until the stream holds it.
func (r *receiptWatch) published(w *watched, m *nats.Msg) {
	seq, ok := storedmsg.Named(m.Header)
	if !ok {
		return // not a receipt of an approval message
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, done := w.first[seq]; !done {
		if _, again := w.rung[seq]; !again {
			w.rung[seq] = time.Now()
		}
		c := liveCopy{seq: seq, batch: m.Header.Get(headerBatchID), data: m.Data}
		if _, stored := w.batches[c.batch]; stored && c.batch != "" {
			// Its batch is known stored already.
			w.noteReceipt(seq, 0, c.data)
		} else {
			w.live = append(w.live, c)
			if len(w.live) > maxLive {
				w.live = slices.Delete(w.live, 0, len(w.live)-maxLive)
			}
		}
	}
	w.ring()
}

// headerBatchID is the header of JetStream's atomic batch publish that
// names the batch a message belongs to.
const headerBatchID = "Nats-Batch-Id"

// Close unsubscribes; waits still running end with errClosed.
func (r *receiptWatch) Close() {
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
// at streamSeq, published for the key (scope, intentID) (see Watch),
// watching the key first if it is not watched yet. It returns an error
// matching ErrNoReceipt when ctx ends first, and also says why the last
// read of the stored receipts failed, if it did.
func (r *receiptWatch) Wait(ctx context.Context, scope, intentID string, streamSeq uint64) (*storedReceipt, error) {
	w, err := r.watch(scope, intentID)
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
			return nil, errClosed
		}
		readErr = r.read(ctx, w, streamSeq)
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
			return nil, r.noReceiptYet(w, streamSeq, ctx.Err(), readErr)
		case <-changed:
		case <-timer.C:
			if !unstored {
				slow = min(2*slow, scanMax)
			}
		}
	}
}

// NoReceiptError is the error of a wait that ended before the receipt of
// a published message: the message is stored, an executor may still carry
// it out, and sending again is safe. It matches ErrNoReceipt and wraps why
// the wait ended (ctx's error, or the listener closed) and, when the last
// read of the stored receipts had failed, that failure.
type NoReceiptError struct {
	// StreamSeq is the APPROVALS sequence of the message waited for.
	StreamSeq uint64
	// InDoubtUntil, when not zero, is the decided_after of the last
	// in_doubt receipt read for the message: its task service held the
	// key in doubt until then (an earlier call for it may still land), and
	// the message is delivered again after it.
	InDoubtUntil time.Time
	// Err says why the wait ended.
	Err error
	// ReadErr is the failure of the last read of the stored receipts; nil
	// when it succeeded.
	ReadErr error
}

func noReceipt(seq uint64, cause, readErr error) error {
	return &NoReceiptError{StreamSeq: seq, Err: cause, ReadErr: readErr}
}

// noReceiptYet is noReceipt with what the in_doubt receipts read for
// message seq said.
func (r *receiptWatch) noReceiptYet(w *watched, seq uint64, cause, readErr error) error {
	e := &NoReceiptError{StreamSeq: seq, Err: cause, ReadErr: readErr}
	r.mu.Lock()
	until := w.inDoubt[seq]
	r.mu.Unlock()
	e.InDoubtUntil, _ = parseTime(until)
	return e
}

// cause says why the wait ended, with the last failed read if there was
// one, and until when the message was in doubt if it was.
func (e *NoReceiptError) cause() string {
	s := fmt.Sprint(e.Err)
	if e.ReadErr != nil {
		s = fmt.Sprintf("%v (the last read of the stored receipts failed: %v)", e.Err, e.ReadErr)
	}
	if !e.InDoubtUntil.IsZero() {
		s += fmt.Sprintf("; in doubt until %s: an earlier call for its key may still land, and an executor delivers the message again after that time",
			e.InDoubtUntil.UTC().Add(time.Second-1).Truncate(time.Second).Format(time.RFC3339))
	}
	return s
}

func (e *NoReceiptError) Error() string {
	return fmt.Sprintf("%s for stream message %d: %s", ErrNoReceipt, e.StreamSeq, e.cause())
}

// Unwrap gives ErrNoReceipt, why the wait ended and the failed read.
func (e *NoReceiptError) Unwrap() []error {
	out := []error{ErrNoReceipt, e.Err}
	if e.ReadErr != nil {
		out = append(out, e.ReadErr)
	}
	return out
}

// read reads the last receipt stored on w's subject and notes it, with the
// receipts seen published in the same atomic batch. When that leaves the
// receipt of the approval message at want unknown although it may be
// stored (the last receipt names a later message, or the receipt was seen
// published hiddenAfter ago or more), it scans the key's stored receipts
// (scan).
func (r *receiptWatch) read(ctx context.Context, w *watched, want uint64) error {
	w.reading.Lock()
	defer w.reading.Unlock()
	m, err := r.last(ctx, w.subject)
	if err != nil || m == nil {
		return err
	}
	r.mu.Lock()
	w.note(m)
	// A later receipt of the key hides the one looked for from the direct
	// get, which reads the last one only. Where the credentials allow a
	// message get (every role but a tenant), scan the key's receipts
	// stored since the last scan.
	_, found := w.first[want]
	seenAt, seen := w.rung[want]
	lastFor, _ := storedmsg.Named(m.Header)
	hidden := !found && (lastFor > want || seen && time.Since(seenAt) >= hiddenAfter)
	r.mu.Unlock()
	if hidden && !r.noScan.Load() {
		r.scan(ctx, w)
	}
	return nil
}

// scan notes every receipt stored on w's subject from w.next on, read one
// at a time with the stream's message get (next_by_subj). The first failure
// turns scans off for r: a tenant's credentials allow only the direct get
// of the last receipt of a key. w.reading is held.
func (r *receiptWatch) scan(ctx context.Context, w *watched) {
	for {
		m, err := r.nextStored(ctx, w.next, w.subject)
		if err != nil {
			r.noScan.Store(true)
			return
		}
		if m == nil {
			return
		}
		w.next = m.Sequence + 1
		r.mu.Lock()
		w.note(m)
		r.mu.Unlock()
	}
}

// nextStored returns the first receipt stored on subject at or after
// sequence from, or nil when there is none.
func (r *receiptWatch) nextStored(ctx context.Context, from uint64, subject string) (*jetstream.RawStreamMsg, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return r.msgGet.Next(rctx, subject, storedmsg.From{Seq: from})
}

// note takes one stored receipt into account, and with it every receipt
// seen published in its atomic batch: the stream stored the batch whole.
// receiptWatch.mu is held.
func (w *watched) note(m *jetstream.RawStreamMsg) {
	// A message stored by an atomic batch keeps the batch's id: the batch
	// was committed, and every receipt of it seen published is stored.
	batch := m.Header.Get(headerBatchID)
	if batch != "" {
		w.batches[batch] = struct{}{}
		// Oldest first, so that of two receipts of one message in the
		// batch the first published is the one reported.
		var in []liveCopy
		w.live = slices.DeleteFunc(w.live, func(c liveCopy) bool {
			if c.batch == batch {
				in = append(in, c)
			}
			return c.batch == batch
		})
		for _, c := range in {
			w.noteReceipt(c.seq, 0, c.data)
		}
	}
	seq, ok := storedmsg.Named(m.Header)
	if !ok {
		return // names no approval message: nobody's receipt
	}
	w.noteReceipt(seq, m.Sequence, m.Data)
}

// noteReceipt takes one receipt known stored into account: the first
// terminal one of message seq is its receipt; an in_doubt one is noted,
// for a wait that ends before the receipt to say until when. stored is its RECEIPTS
// sequence (0 when it is known stored by its batch only). receiptWatch.mu is
// held.
func (w *watched) noteReceipt(seq, stored uint64, data []byte) {
	delete(w.rung, seq)
	if _, done := w.first[seq]; done {
		return
	}
	rc, err := document.DecodeReceipt(data)
	at := "in a stored batch"
	if stored != 0 {
		at = "RECEIPTS sequence " + strconv.FormatUint(stored, 10)
	}
	switch {
	case err != nil:
		w.first[seq] = result{err: fmt.Errorf("%w: the receipt for message %d (%s) does not decode: %v", ErrBadReceipt, seq, at, err)}
	case rc.Of(seq):
		w.first[seq] = result{r: &storedReceipt{Receipt: rc, Raw: data}}
		w.live = slices.DeleteFunc(w.live, func(c liveCopy) bool { return c.seq == seq })
	case rc.Outcome == document.OutcomeInDoubt && rc.Delivery.StreamSeq == seq:
		if w.inDoubt == nil {
			w.inDoubt = map[uint64]string{}
		}
		w.inDoubt[seq] = rc.DecidedAfter
	}
}

// errRead marks a read of a stored message (lastStored) that may succeed
// when tried again: no answer in time, nobody to answer, the stream's leader away.
var errRead = errors.New("send: reading the last stored message")

func transient(err error) bool { return errors.Is(err, errRead) }

// Headers of a direct get's answer.
const (
	headerStatus      = "Status"
	headerDescription = "Description"
	statusNotFound    = "404"
)

// last returns the last receipt stored on subject, or nil when there is
// none, read with a direct get whose API subject names subject.
func (r *receiptWatch) last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return lastStored(ctx, r.nc, r.get, topology.ReceiptsStream, subject)
}

// lastStored returns the last message stream stored on subject, or nil when
// there is none, read with the direct get api (the stream's direct get
// subject, without the subject read) whose API subject names subject: what
// a permission can confine to one scope. Its errors that may pass when
// tried again match errRead.
func lastStored(ctx context.Context, nc *nats.Conn, api, stream, subject string) (*jetstream.RawStreamMsg, error) {
	api += "." + subject
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	reply, err := nc.RequestWithContext(rctx, api, nil)
	switch {
	case errors.Is(err, nats.ErrConnectionClosed):
		return nil, fmt.Errorf("send: reading %s on %s: %w", stream, subject, err)
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w of %s on %s: %w (no stream %s allowing direct gets answers %s; provisioning makes it so)",
			errRead, stream, subject, err, stream, api)
	case err != nil:
		return nil, fmt.Errorf("%w of %s on %s: %w", errRead, stream, subject, err)
	}
	if status := reply.Header.Get(headerStatus); len(reply.Data) == 0 && status != "" {
		desc := reply.Header.Get(headerDescription)
		switch {
		case status == statusNotFound:
			return nil, nil
		case strings.HasPrefix(status, "5"):
			return nil, fmt.Errorf("%w of %s on %s: the server answered %s %s", errRead, stream, subject, status, desc)
		}
		return nil, fmt.Errorf("send: reading %s on %s: the server answered %s %s to %s", stream, subject, status, desc, api)
	}
	m := &jetstream.RawStreamMsg{Subject: reply.Header.Get(jetstream.SubjectHeader), Header: reply.Header, Data: reply.Data}
	if m.Sequence, err = strconv.ParseUint(reply.Header.Get(jetstream.SequenceHeader), 10, 64); err != nil {
		return nil, fmt.Errorf("send: reading %s on %s: the answer to %s names no stream sequence: %w", stream, subject, api, err)
	}
	if ts := reply.Header.Get(jetstream.TimeStampHeaer); ts != "" {
		if m.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return nil, fmt.Errorf("send: reading %s on %s: the time stamp of sequence %d: %w", stream, subject, m.Sequence, err)
		}
	}
	if got := reply.Header.Get(jetstream.StreamHeader); got != stream || m.Subject != subject {
		return nil, fmt.Errorf("send: reading %s on %s: the stream answered with %s on stream %q at %d", stream, subject, m.Subject, got, m.Sequence)
	}
	return m, nil
}
