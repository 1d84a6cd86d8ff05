package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/queue"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// reference is one reference measurement.
type reference struct {
	name string
	what string
	n    int
	took time.Duration
	unit string
}

func (r *reference) rate() float64 {
	if r == nil || r.took <= 0 {
		return 0
	}
	return float64(r.n) / r.took.Seconds()
}

// Names of the naive reference's streams and consumer.
const (
	naiveIn       = "BENCH_NAIVE_IN"
	naiveOut      = "BENCH_NAIVE_OUT"
	naiveConsumer = "naive"
)

// measureReferences measures the references on s (the ledger when
// PostgreSQL is there and the run asks for it), with the
// concurrency of the first executor count measured.
func measureReferences(ctx context.Context, s *stack, st *stages, rep *report) error {
	o := s.o
	k := o.Executors[0]
	w, err := generate(workloadSpec{N: 1, Payload: o.Payload, Prefix: "ref", Key: o.key, Now: time.Now(), ApprovalTimeout: time.Hour})
	if err != nil {
		return err
	}
	env := w.Envelopes[0]
	receipt := sampleReceipt()

	for _, ref := range []struct {
		name    string
		measure func(ctx context.Context, n, k, c, envBytes int, receipt []byte) (*reference, error)
		into    **reference
	}{
		{"naive JetStream", s.naiveJetStream, &rep.naive},
		{"batched JetStream", s.batchedJetStream, &rep.batched},
	} {
		end := st.begin("reference: " + ref.name)
		measured, err := ref.measure(ctx, o.RefApprovals, k, o.Concurrency, len(env), receipt)
		if err != nil {
			return fmt.Errorf("bench: the %s reference: %w", ref.name, err)
		}
		end()
		*ref.into = measured
	}

	end := st.begin("reference: Pebble alone")
	dir := filepath.Join(os.TempDir(), "sendtwice-bench-pebble-"+nuid.Next())
	if s.dir != "" {
		dir = filepath.Join(s.dir, "pebble-reference")
	}
	writers := k * o.Concurrency
	took, err := provider.PebbleReference(ctx, dir, writers, o.RefApprovals)
	_ = os.RemoveAll(dir)
	if err != nil {
		return fmt.Errorf("bench: the Pebble reference: %w", err)
	}
	end()
	rep.pebble = &reference{name: "Pebble alone", n: o.RefApprovals, took: took, unit: "requests/s",
		what: fmt.Sprintf("%d writers; the service's records for one create call, one synced batch per request", writers)}
	syscall.Sync()

	if err := measureLedger(ctx, s, st, rep); err != nil {
		return err
	}
	// Write back what the references left in the page cache now, not
	// during the next measurement.
	syscall.Sync()
	return nil
}

// sampleReceipt is a receipt as an executor stores it, for its size.
func sampleReceipt() []byte {
	s := func(v string) *string { return &v }
	r := document.Receipt{
		SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-" + nuid.Next(), Outcome: document.OutcomeCreated,
		IntentID: s("intent-s0-e1-0000001"), RequestID: s("task-request-s0-e1-0000001"), ApprovalID: s("approval-s0-e1-0000001"),
		TaskID: s("fake-task-0001"), Counts: &document.Counts{RequestsReceived: 100000, CreatesExecuted: 100000, TasksExisting: 100000},
		Delivery: document.Delivery{StreamSeq: 100000, Delivered: 1, Attempt: nuid.Next(), Executor: "bench-1"},
		IssuedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}
	b, _ := json.Marshal(r)
	return b
}

// receiptBatchesInFlight is the batched reference's number of batches in
// flight. The executor keeps one and frees it at the commit's ack, acking
// that batch's messages while the next is stored; the reference's second
// sender stands for that overlap.
const receiptBatchesInFlight = 2

// naiveJetStream is the straightforward design with nothing else: n
// messages of envBytes in a stream; k instances of c handlers consume them,
// and for each publish one receipt-sized message to a second stream alone,
// wait for its ack, then ack. No gate, no service. Both streams are made for
// the measurement and deleted after it.
func (s *stack) naiveJetStream(ctx context.Context, n, k, c, envBytes int, receipt []byte) (*reference, error) {
	took, err := s.measureRef(ctx, "naive", n, k, c, envBytes, func(i refInstance) refSink {
		return &aloneSink{refInstance: i, receipt: receipt}
	})
	if err != nil {
		return nil, err
	}
	return &reference{name: "naive JetStream", n: n, took: took, unit: "messages/s",
		what: fmt.Sprintf("%d×%d handlers; consume, publish one %d-byte message alone and wait for its ack, ack", k, c, len(receipt))}, nil
}

// batchedJetStream measures the JetStream part of the executor's design
// alone, as naiveJetStream does the naive design: the receipt-sized
// messages gathered into atomic batches as the executor gathers its
// receipts (as many as have queued, up to the run's receipt batch size, two
// batches in flight), each message acked once its batch's commit is
// acknowledged. Still no gate, no service: JetStream's own cost of storing
// one receipt per approval this way, which the pipeline cannot beat.
func (s *stack) batchedJetStream(ctx context.Context, n, k, c, envBytes int, receipt []byte) (*reference, error) {
	batchMax := s.o.ReceiptBatch
	if batchMax <= 0 || batchMax > 1000 {
		batchMax = 1000 // the executor's default and the server's limit
	}
	took, err := s.measureRef(ctx, "batched", n, k, c, envBytes, func(i refInstance) refSink {
		return newBatchSink(i, receipt, batchMax)
	})
	if err != nil {
		return nil, err
	}
	return &reference{name: "batched JetStream", n: n, took: took, unit: "messages/s",
		what: fmt.Sprintf("%d×%d handlers; consume, store %d-byte messages in atomic batches (up to %d, %d in flight), ack each after its batch's commit ack", k, c, len(receipt), batchMax, receiptBatchesInFlight)}, nil
}

// measureRef runs one JetStream reference: n messages of envBytes stored on
// a stream made for it, then k instances of c handlers that hand each
// message to the sink newSink makes; it returns the time until every
// message is acked.
func (s *stack) measureRef(ctx context.Context, name string, n, k, c, envBytes int, newSink func(refInstance) refSink) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if err := s.makeStreams(ctx,
		jetstream.StreamConfig{Name: naiveIn, Subjects: []string{"bench.naive.in.>"}, AllowAtomicPublish: true},
		jetstream.StreamConfig{Name: naiveOut, Subjects: []string{"bench.naive.out.>"}, AllowAtomicPublish: true},
	); err != nil {
		return 0, err
	}
	defer s.deleteStreams(naiveIn, naiveOut)
	if err := s.storeRefBacklog(ctx, n, envBytes); err != nil {
		return 0, err
	}
	cons, err := s.refConsumer(ctx, naiveIn, naiveConsumer)
	if err != nil {
		return 0, err
	}
	return s.runInstances(ctx, cons, "bench-naive-", k, c, fmt.Sprintf("%s: %d×%d handlers", name, k, c), n,
		func(_ int, i refInstance) refSink { return newSink(i) })
}

// makeStreams makes the streams of a reference afresh, on file storage with
// the approvals stream's replicas and duplicate window.
func (s *stack) makeStreams(ctx context.Context, configs ...jetstream.StreamConfig) error {
	replicas := s.topo.Replicas
	if st, err := s.js.Stream(ctx, topology.ApprovalsStream); err == nil {
		if info, err := st.Info(ctx); err == nil {
			replicas = info.Config.Replicas
		}
	}
	for _, sc := range configs {
		sc.Storage, sc.Replicas, sc.Duplicates = jetstream.FileStorage, replicas, s.topo.DuplicateWindow
		_ = s.js.DeleteStream(ctx, sc.Name)
		if _, err := s.js.CreateStream(ctx, sc); err != nil {
			return fmt.Errorf("bench: creating stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// deleteStreams deletes a reference's streams.
func (s *stack) deleteStreams(names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range names {
		_ = s.js.DeleteStream(ctx, name)
	}
}

// refConsumer makes a reference's consumer on stream, with the executors'
// settings.
func (s *stack) refConsumer(ctx context.Context, stream, durable string) (jetstream.Consumer, error) {
	return s.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.topo.AckWait,
		MaxAckPending: s.topo.MaxAckPending, MaxDeliver: s.topo.MaxDeliver,
	})
}

// runInstances starts k instances of c handlers on cons (connections named
// name and the instance's number), each handing the messages to the sink
// newSink makes for it, waits until every one of the n messages is acked
// (progress shown under label), stops them and returns the time taken.
func (s *stack) runInstances(ctx context.Context, cons jetstream.Consumer, name string, k, c int, label string, n int, newSink func(int, refInstance) refSink) (time.Duration, error) {
	start := time.Now()
	fails := &refFailures{}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i := range k {
		stop, err := s.startRefInstance(ctx, cons, name+strconv.Itoa(i+1), c, fails, func(in refInstance) refSink { return newSink(i, in) })
		if err != nil {
			return 0, err
		}
		stops = append(stops, stop)
	}
	if err := s.awaitRefDrained(ctx, cons, label, n, fails); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// storeRefBacklog stores n messages of envBytes on the references' input
// stream.
func (s *stack) storeRefBacklog(ctx context.Context, n, envBytes int) error {
	body := make([]byte, envBytes)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	subjects := make([]string, n)
	bodies := make([][]byte, n)
	for i := range subjects {
		subjects[i] = "bench.naive.in." + strconv.Itoa(i%1024)
		bodies[i] = body
	}
	bar := newProgress(s.o.Status, s.o.Terminal)
	bar.begin("naive: storing", n)
	_, err := storeAll(ctx, s.nc, naiveIn, subjects, bodies, s.o.PublishBatch, bar.set)
	bar.end()
	return err
}

// refFailures gathers the failures of a reference's handlers.
type refFailures struct {
	mu  sync.Mutex
	err error
}

func (f *refFailures) add(err error) {
	f.mu.Lock()
	f.err = errors.Join(f.err, err)
	f.mu.Unlock()
}

func (f *refFailures) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// refInstance is what a reference's sink works with: its instance's
// connection, a context bounding the measurement, done (closed when the
// instance stops: what a handler holds is given up) and where failures go.
type refInstance struct {
	ctx   context.Context
	nc    *nats.Conn
	js    jetstream.JetStream
	done  <-chan struct{}
	fails *refFailures
}

// refSink is what a reference does with each message consumed: store a
// receipt-sized message and ack. close is called once no handler runs.
type refSink interface {
	handle(msg jetstream.Msg)
	close()
}

// startRefInstance starts one instance of c handlers consuming cons on a
// connection of its own, named name; stop ends it.
func (s *stack) startRefInstance(ctx context.Context, cons jetstream.Consumer, name string, c int, fails *refFailures, newSink func(refInstance) refSink) (stop func(), err error) {
	nc, err := s.connect(name)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// done tells handlers to give up at the end (what they hold is
	// redelivered, and the streams are deleted anyway); stopped, under mu,
	// keeps a handler from starting once the end has begun.
	done := make(chan struct{})
	sink := newSink(refInstance{ctx: ctx, nc: nc, js: js, done: done, fails: fails})
	var mu sync.Mutex
	stopped := false
	sem := make(chan struct{}, c)
	var wg sync.WaitGroup
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case sem <- struct{}{}:
		case <-done:
			return
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			<-sem
			return
		}
		wg.Add(1)
		mu.Unlock()
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sink.handle(msg)
		}()
	}, jetstream.PullMaxMessages(2*c))
	if err != nil {
		sink.close()
		nc.Close()
		return nil, err
	}
	return func() {
		close(done)
		cc.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
		wg.Wait() // no handler starts after this, so none hands the sink more
		sink.close()
		nc.Close()
	}, nil
}

// awaitRefDrained waits until cons has no message left, showing progress
// under label, or a handler failed.
func (s *stack) awaitRefDrained(ctx context.Context, cons jetstream.Consumer, label string, n int, fails *refFailures) error {
	bar := newProgress(s.o.Status, s.o.Terminal)
	bar.begin(label, n)
	defer bar.end()
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		l := int(info.NumPending) + info.NumAckPending
		bar.set(n - min(l, n))
		if l == 0 {
			return nil
		}
		if err := fails.get(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refReceipt is the receipt-sized message a reference stores for msg.
func refReceipt(msg jetstream.Msg, receipt []byte) *nats.Msg {
	m := nats.NewMsg("bench.naive.out." + strconv.Itoa(int(msg.Data()[0])))
	m.Data = receipt
	m.Header.Set(topology.HeaderOutcome, document.OutcomeCreated)
	m.Header.Set(topology.HeaderStreamSeq, "100000")
	m.Header.Set(topology.HeaderDelivered, "1")
	return m
}

// aloneSink publishes each receipt-sized message alone, waits for its ack,
// then acks the message consumed.
type aloneSink struct {
	refInstance
	receipt []byte
}

func (a *aloneSink) handle(msg jetstream.Msg) {
	pctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	_, err := a.js.PublishMsg(pctx, refReceipt(msg, a.receipt), jetstream.WithMsgID("naive-"+nuid.Next()), jetstream.WithExpectStream(naiveOut))
	cancel()
	if err != nil {
		a.fails.add(err)
		_ = msg.Nak()
		return
	}
	_ = msg.Ack()
}

func (a *aloneSink) close() {}

// batchSink queues the messages consumed; receiptBatchesInFlight senders
// take what has queued (up to max) and store it as one atomic batch, then
// ack each message of it.
type batchSink struct {
	refInstance
	receipt []byte
	max     int
	queue   chan jetstream.Msg
	senders sync.WaitGroup
}

func newBatchSink(i refInstance, receipt []byte, batchMax int) *batchSink {
	b := &batchSink{refInstance: i, receipt: receipt, max: batchMax, queue: make(chan jetstream.Msg, 4*batchMax)}
	for range receiptBatchesInFlight {
		b.senders.Go(b.send)
	}
	return b
}

func (b *batchSink) handle(msg jetstream.Msg) {
	select {
	case b.queue <- msg:
	case <-b.done:
	}
}

func (b *batchSink) send() {
	for first := range b.queue {
		taken := queue.Append(nil, first, b.queue, b.max)
		msgs := make([]*nats.Msg, len(taken))
		for i, m := range taken {
			msgs[i] = refReceipt(m, b.receipt)
		}
		pctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		_, err := publishGroup(pctx, b.nc, naiveOut, msgs)
		cancel()
		for _, m := range taken {
			if err != nil {
				_ = m.Nak()
			} else {
				_ = m.Ack()
			}
		}
		if err != nil {
			b.fails.add(err)
		}
	}
}

func (b *batchSink) close() {
	close(b.queue)
	b.senders.Wait()
}
