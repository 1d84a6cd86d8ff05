package executor

import (
	"context"
	"encoding/json"
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
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/queue"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// Headers of JetStream's atomic batch publish: every message of a batch
// carries the batch id and its position; the last one also the commit. The
// server stages the messages and stores all of them, or none, when the
// commit arrives, and acknowledges the commit once all are synced.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// Error codes of the server's answer to a batch commit that matter here.
const (
	errCodeAtomicDisabled = 10174 // the stream does not allow atomic publish
	errCodeBatchTooLarge  = 10199 // more messages than the server allows in one batch

	errCodeClusterNotAvailable   = 10008 // JetStream system temporarily unavailable
	errCodeInsufficientResources = 10023
)

// commitTimeout bounds the wait for a batch commit's ack, and for a receipt
// stored alone.
const commitTimeout = 10 * time.Second

// aloneInFlight bounds the receipts of one failed batch stored alone at once.
const aloneInFlight = 64

// AloneUpTo is the most receipts stored by publishing each alone, all at
// once, rather than as an atomic batch (unless two of them are for one key:
// distinctKeys). nats-server stages an atomic batch for a file-backed
// stream with one replica in a file store of its own, made and removed for
// each batch (four fsyncs and about twenty file-system calls), so that a
// batch of a few receipts takes longer to store than the same receipts each
// published and synced alone (BenchmarkReceiptBatch).
const AloneUpTo = 8

// pending is a receipt waiting to be stored, with the delivery it is for.
type pending struct {
	d    *delivery
	r    *document.Receipt
	m    *nats.Msg
	term bool
	// progress, when set, stops the delivery's progress signals.
	progress func()
	// span is the receipt store span, from the receipt joining its batch
	// until it is stored or given up.
	span trace.Span
}

// stopProgress stops the delivery's progress signals, once.
func (p *pending) stopProgress() {
	if p.progress != nil {
		p.progress()
		p.progress = nil
	}
}

// systemic reports whether err says that JetStream cannot store anything
// now (no stream answering, no answer in time, no connection), rather than
// that one message was refused: storing further receipts would only wait
// for the same failure.
func systemic(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeJetStreamNotEnabled, jetstream.JSErrCodeStreamNotFound,
			errCodeClusterNotAvailable, errCodeInsufficientResources:
			return true
		}
		return apiErr.Code == 503
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) ||
		errors.Is(err, nats.ErrDisconnected)
}

// batcher stores receipts on the RECEIPTS stream. While running, a receipt
// waits in a queue; a sender takes everything queued (up to the batch size)
// as soon as one of the batch slots is free, so batches are as large as the
// load makes them: one receipt alone when the executor is idle, many while
// earlier batches are being synced. A batch of up to AloneUpTo receipts is
// stored by publishing each alone, all at once, and each message is acked
// once its receipt's publish is. A larger batch is one atomic batch publish
// whose commit is a request; only when the stream's ack of the commit
// arrives, which the server sends once every receipt of the batch is stored
// and synced, are the batch's messages acked. A batch's slot is free again
// once the stream has answered, so that the next batch is stored while its
// messages are acked. If an atomic batch fails, each of its receipts is
// stored alone (its message id makes a receipt that the batch did store a
// duplicate, which the stream reports as such), and a receipt that cannot
// be stored gets its message nak'ed.
type batcher struct {
	e   *Executor
	max atomic.Int64 // the most receipts in one batch

	batches, batched atomic.Int64 // batches stored, and the receipts in them
	alone            atomic.Bool  // the stream refuses atomic batches: store receipts alone

	mu      sync.RWMutex // guards running and sending on queue
	running bool
	queue   chan *pending
	slots   chan struct{}
	sending sync.WaitGroup // batches being stored
	done    chan struct{}  // closed when the sender loop has ended

	// Replies to batch commits arrive on one subscription, routed by the
	// last token of the reply subject.
	inbox   string
	sub     *nats.Subscription
	replyMu sync.Mutex
	waiting map[string]chan *nats.Msg
}

func newBatcher(e *Executor) *batcher {
	b := &batcher{e: e}
	b.max.Store(int64(e.cfg.ReceiptBatch))
	return b
}

// start starts the sender loop and the reply subscription.
func (b *batcher) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return errors.New("executor: already running")
	}
	if b.e.cfg.ReceiptBatch > 1 {
		b.inbox = b.e.nc.NewInbox()
		sub, err := b.e.nc.Subscribe(b.inbox+".*", b.reply)
		if err != nil {
			return fmt.Errorf("executor: subscribing to batch commit replies: %w", err)
		}
		b.sub = sub
		b.waiting = map[string]chan *nats.Msg{}
	}
	b.queue = make(chan *pending, 4*b.e.cfg.ReceiptBatch)
	b.slots = make(chan struct{}, b.e.cfg.ReceiptBatchesInFlight)
	b.done = make(chan struct{})
	b.running = true
	go b.loop(b.queue, b.done)
	return nil
}

// stop lets every queued receipt be stored and its message finished, then
// ends the sender loop. Receipts that arrive later are stored alone.
func (b *batcher) stop() {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return
	}
	b.running = false
	close(b.queue)
	done := b.done
	b.mu.Unlock()
	<-done
	b.sending.Wait()
	if b.sub != nil {
		_ = b.sub.Unsubscribe()
		b.sub = nil
	}
}

// add hands a receipt over. While the batcher runs, the receipt is queued and
// the delivery's handler slot released; otherwise it is stored here and now.
func (b *batcher) add(p *pending) {
	b.mu.RLock()
	if b.running {
		// The slot is given back once the receipt is queued (a full queue
		// holds the slot: back-pressure on the handlers), and by this
		// goroutine: the delivery belongs to the sender loop from now on.
		release := p.d.released
		p.d.released = nil
		b.queue <- p
		b.mu.RUnlock()
		if release != nil {
			release()
		}
		return
	}
	b.mu.RUnlock()
	b.storeAlone([]*pending{p})
}

// loop takes the queued receipts in batches.
func (b *batcher) loop(q chan *pending, done chan struct{}) {
	defer close(done)
	for first := range q {
		// Wait for a free slot; receipts queue up meanwhile.
		b.slots <- struct{}{}
		limit := int(b.max.Load())
		batch := queue.Append(make([]*pending, 0, min(limit, len(q)+1)), first, q, limit)
		b.sending.Add(1)
		go func() {
			defer b.sending.Done()
			b.store(batch, sync.OnceFunc(func() { <-b.slots }))
		}()
	}
}

// store stores one batch of receipts and finishes their deliveries. It
// frees the batch's slot (free) as soon as the stream has acknowledged the
// batch's commit, or the receipt of a batch of one, so that the next batch
// is stored while this one's messages are acked.
func (b *batcher) store(batch []*pending, free func()) {
	defer free()
	if len(batch) == 1 {
		_ = b.storeOne(batch[0], free) // a receipt not stored was given back by notStored
		return
	}
	if b.alone.Load() || b.sub == nil || len(batch) <= AloneUpTo && distinctKeys(batch) {
		b.storeAlone(batch)
		return
	}
	err := b.publishBatch(batch)
	if err == nil {
		free()
		b.batches.Add(1)
		b.batched.Add(int64(len(batch)))
		for _, p := range batch {
			b.e.stored(p)
		}
		return
	}
	if systemic(err) {
		// The stream cannot store now: give every delivery back at once
		// rather than try each receipt alone against the same failure.
		b.e.log.Warn("storing a receipt batch failed; giving its deliveries back", "receipts", len(batch), "err", err)
		for _, p := range batch {
			b.e.notStored(p, err)
		}
		return
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeAtomicDisabled:
			if !b.alone.Swap(true) {
				b.e.log.Warn("the receipts stream does not allow atomic batches; storing every receipt alone (update the topology to allow them)",
					"stream", topology.ReceiptsStream)
			}
		case errCodeBatchTooLarge:
			if n := b.max.Load(); n > 1 {
				b.max.CompareAndSwap(n, max(n/2, 1))
				b.e.log.Warn("the server refused a receipt batch as too large; halving the batch size", "batch", len(batch), "now", max(n/2, 1))
			}
		}
	}
	b.e.log.Warn("storing a receipt batch failed; storing its receipts one by one", "receipts", len(batch), "err", err)
	b.storeAlone(batch)
}

// distinctKeys reports whether every receipt of batch is for a key of its
// own (a receipt's subject names its key). Receipts of one key go in one
// atomic batch however few they are: a wait that may read only the last
// stored receipt of a key (a tenant's, in package send) finds a receipt
// that a later one of its key hides only through the batch they share.
func distinctKeys(batch []*pending) bool {
	for i, p := range batch {
		for _, q := range batch[:i] {
			if p.m.Subject == q.m.Subject {
				return false
			}
		}
	}
	return true
}

// storeAlone stores each receipt with its own publish, up to aloneInFlight
// at once, waiting for the stream's ack, and finishes its delivery. After
// the first systemic failure, the receipts not yet sent are not tried: their
// deliveries are given back at once.
func (b *batcher) storeAlone(batch []*pending) {
	if len(batch) == 1 {
		_ = b.storeOne(batch[0], func() {}) // a receipt not stored was given back by notStored
		return
	}
	var failed atomic.Pointer[error]
	sem := make(chan struct{}, aloneInFlight)
	var wg sync.WaitGroup
	for _, p := range batch {
		if errp := failed.Load(); errp != nil {
			b.e.notStored(p, *errp)
			continue
		}
		sem <- struct{}{}
		if errp := failed.Load(); errp != nil {
			<-sem
			b.e.notStored(p, *errp)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := b.storeOne(p, func() {}); err != nil && systemic(err) {
				failed.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
}

// storeOne stores one receipt with its own publish, calls answered once the
// stream has answered, and finishes its delivery; it returns the error for
// a receipt not stored.
func (b *batcher) storeOne(p *pending, answered func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	_, err := b.e.js.PublishMsg(ctx, p.m)
	cancel()
	answered()
	if err != nil {
		b.e.notStored(p, err)
		return err
	}
	b.e.stored(p)
	return nil
}

// ReceiptBatches returns how many receipt batches this instance stored as
// atomic batches, and how many receipts they held.
func (e *Executor) ReceiptBatches() (batches, receipts int64) {
	return e.receipts.batches.Load(), e.receipts.batched.Load()
}

// BatchAck is the stream's answer to an atomic batch's commit, or to a
// message published alone.
type BatchAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
	Error  *jetstream.APIError `json:"error,omitempty"`
}

// Seqs returns the stream sequences of the n messages the ack is for: a
// batch is stored in one piece, so they are consecutive and end with the
// commit's.
func (a BatchAck) Seqs(n int) []uint64 {
	seqs := make([]uint64, n)
	for k := range seqs {
		seqs[k] = a.Seq - uint64(n-1-k)
	}
	return seqs
}

// PublishBatch stores msgs on stream as one atomic batch and waits, up to
// ctx, for the ack of its commit; a single message is published alone.
// Each message is sent as a copy that carries the batch headers: msgs stay
// as they are. It returns the ack only when the stream says it stored the
// whole batch. The stream must allow atomic publish.
func PublishBatch(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) (BatchAck, error) {
	if len(msgs) == 0 {
		return BatchAck{}, nil
	}
	if len(msgs) == 1 {
		reply, err := nc.RequestMsgWithContext(ctx, msgs[0])
		if err != nil {
			return BatchAck{}, fmt.Errorf("executor: publishing a message on %s: %w", stream, err)
		}
		return readBatchAck(reply, stream, "", 1)
	}
	id := nuid.Next()
	commit, err := stageBatch(nc, msgs, id)
	if err != nil {
		return BatchAck{}, err
	}
	reply, err := nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return BatchAck{}, fmt.Errorf("executor: committing a batch of %d messages on %s: %w", len(msgs), stream, err)
	}
	return readBatchAck(reply, stream, id, len(msgs))
}

// stageBatch publishes every message of batch id but the last, each as a
// copy with the batch headers, and returns the last one's copy with the
// commit header, for the caller to send with a reply subject.
func stageBatch(nc *nats.Conn, msgs []*nats.Msg, id string) (commit *nats.Msg, err error) {
	last := len(msgs) - 1
	for i, m := range msgs[:last] {
		if err := nc.PublishMsg(batchMember(m, id, i+1)); err != nil {
			return nil, fmt.Errorf("executor: publishing message %d of a batch of %d: %w", i+1, len(msgs), err)
		}
	}
	commit = batchMember(msgs[last], id, last+1)
	commit.Header.Set(headerBatchCommit, "1")
	return commit, nil
}

// readBatchAck reads the answer to a commit of batch id of n messages on
// stream (id empty: a message published alone) and checks that it says the
// whole batch is stored.
func readBatchAck(reply *nats.Msg, stream, id string, n int) (BatchAck, error) {
	if len(reply.Data) == 0 && reply.Header.Get("Status") == "503" {
		return BatchAck{}, fmt.Errorf("committing a batch of %d messages: %w", n, nats.ErrNoResponders)
	}
	var ack BatchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return BatchAck{}, fmt.Errorf("reading the ack of a batch commit: %w", err)
	}
	if ack.Error != nil {
		return BatchAck{}, ack.Error
	}
	if id == "" {
		ack.Count = 1
	}
	if ack.Stream != stream || ack.Batch != id || ack.Count != n {
		return BatchAck{}, fmt.Errorf("the ack of a batch commit says stream %q, batch %q, %d messages; want %q, %q, %d",
			ack.Stream, ack.Batch, ack.Count, stream, id, n)
	}
	return ack, nil
}

// publishBatch publishes the receipts as one atomic batch and waits for the
// ack of its commit. It returns nil only when the stream says it stored the
// whole batch.
func (b *batcher) publishBatch(batch []*pending) error {
	id := nuid.Next()
	token := id
	replies := make(chan *nats.Msg, 1)
	b.replyMu.Lock()
	b.waiting[token] = replies
	b.replyMu.Unlock()
	defer func() {
		b.replyMu.Lock()
		delete(b.waiting, token)
		b.replyMu.Unlock()
	}()
	msgs := make([]*nats.Msg, len(batch))
	for i, p := range batch {
		msgs[i] = p.m
	}
	commit, err := stageBatch(b.e.nc, msgs, id)
	if err != nil {
		return err
	}
	b.e.fault(BatchStaged, batch[0].d)
	commit.Reply = b.inbox + "." + token
	if err := b.e.nc.PublishMsg(commit); err != nil {
		return fmt.Errorf("publishing receipt %d of a batch of %d: %w", len(batch), len(batch), err)
	}
	b.e.fault(BatchCommitSent, batch[0].d)
	t := time.NewTimer(commitTimeout)
	defer t.Stop()
	var reply *nats.Msg
	select {
	case reply = <-replies:
	case <-t.C:
		return fmt.Errorf("no ack for the commit of a batch of %d receipts within %s: %w", len(batch), commitTimeout, nats.ErrTimeout)
	}
	_, err = readBatchAck(reply, topology.ReceiptsStream, id, len(batch))
	return err
}

// batchMember returns a copy of the receipt message r that carries the
// batch headers for its place seq in batch id. The receipt itself stays as
// it was, so that a batch that fails can store its receipts alone.
func batchMember(r *nats.Msg, id string, seq int) *nats.Msg {
	h := make(nats.Header, len(r.Header)+3)
	for k, vs := range r.Header {
		h[k] = slices.Clone(vs)
	}
	h.Set(headerBatchID, id)
	h.Set(headerBatchSeq, strconv.Itoa(seq))
	return &nats.Msg{Subject: r.Subject, Header: h, Data: r.Data}
}

// reply routes a commit's ack to the batch waiting for it.
func (b *batcher) reply(m *nats.Msg) {
	token := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	b.replyMu.Lock()
	ch := b.waiting[token]
	b.replyMu.Unlock()
	if ch != nil {
		select {
		case ch <- m:
		default:
		}
	}
}
