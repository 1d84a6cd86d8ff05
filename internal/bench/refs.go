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

	end := st.begin("reference: naive JetStream")
	naive, err := s.naiveJetStream(ctx, o.RefApprovals, k, o.Concurrency, len(env), receipt, false)
	if err != nil {
		return fmt.Errorf("bench: the naive JetStream reference: %w", err)
	}
	end()
	rep.naive = naive

	end = st.begin("reference: batched JetStream")
	batched, err := s.naiveJetStream(ctx, o.RefApprovals, k, o.Concurrency, len(env), receipt, true)
	if err != nil {
		return fmt.Errorf("bench: the batched JetStream reference: %w", err)
	}
	end()
	rep.batched = batched

	end = st.begin("reference: Pebble alone")
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

// naiveJetStream is the straightforward design with nothing else: n
// messages of envBytes in a stream; k instances of c handlers consume them,
// and for each publish one receipt-sized message to a second stream alone,
// wait for its ack, then ack. No gate, no service. Both streams are made for
// the measurement and deleted after it.
//
// batched measures instead the JetStream part of the executor's design alone:
// the receipt-sized messages gathered into atomic batches as the executor
// gathers its receipts (as many as have queued, up to the run's receipt batch
// size, two batches in flight), each message acked once its batch's commit is
// acknowledged. Still no gate, no service: JetStream's own cost of storing one
// receipt per approval this way, which the pipeline cannot beat.
func (s *stack) naiveJetStream(ctx context.Context, n, k, c, envBytes int, receipt []byte, batched bool) (*reference, error) {
	batchMax := s.o.ReceiptBatch
	if batchMax <= 0 || batchMax > 1000 {
		batchMax = 1000 // the executor's default and the server's limit
	}
	const receiptBatchesInFlight = 2 // the executor's default
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	topo := s.topo
	replicas := topo.Replicas
	if st, err := s.js.Stream(ctx, topology.ApprovalsStream); err == nil {
		if info, err := st.Info(ctx); err == nil {
			replicas = info.Config.Replicas
		}
	}
	for _, sc := range []jetstream.StreamConfig{
		{Name: naiveIn, Subjects: []string{"bench.naive.in.>"}, Storage: jetstream.FileStorage, Replicas: replicas,
			Duplicates: topo.DuplicateWindow, AllowAtomicPublish: true},
		{Name: naiveOut, Subjects: []string{"bench.naive.out.>"}, Storage: jetstream.FileStorage, Replicas: replicas,
			Duplicates: topo.DuplicateWindow, AllowAtomicPublish: true},
	} {
		_ = s.js.DeleteStream(ctx, sc.Name)
		if _, err := s.js.CreateStream(ctx, sc); err != nil {
			return nil, err
		}
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_ = s.js.DeleteStream(dctx, naiveIn)
		_ = s.js.DeleteStream(dctx, naiveOut)
	}()
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
	if err != nil {
		return nil, err
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, naiveIn, jetstream.ConsumerConfig{
		Durable: naiveConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: topo.AckWait,
		MaxAckPending: topo.MaxAckPending, MaxDeliver: topo.MaxDeliver,
	})
	if err != nil {
		return nil, err
	}
	left := func() (int, error) {
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, err
		}
		return int(info.NumPending) + info.NumAckPending, nil
	}

	start := time.Now()
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	var failMu sync.Mutex
	var failure error
	for i := range k {
		nc, err := s.connect("bench-naive-" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		fail := func(err error) {
			failMu.Lock()
			failure = errors.Join(failure, err)
			failMu.Unlock()
		}
		receiptMsg := func(msg jetstream.Msg) *nats.Msg {
			m := nats.NewMsg("bench.naive.out." + strconv.Itoa(int(msg.Data()[0])))
			m.Data = receipt
			m.Header.Set(topology.HeaderOutcome, document.OutcomeCreated)
			m.Header.Set(topology.HeaderStreamSeq, "100000")
			m.Header.Set(topology.HeaderDelivered, "1")
			return m
		}
		// done tells handlers to give up at the end (what they hold is
		// redelivered, and the streams are deleted anyway); stopped, under
		// mu, keeps a handler from starting once the end has begun.
		done := make(chan struct{})
		var mu sync.Mutex
		stopped := false
		var queue chan jetstream.Msg
		var senders sync.WaitGroup
		if batched {
			queue = make(chan jetstream.Msg, 4*batchMax)
			for range receiptBatchesInFlight {
				senders.Go(func() {
					for first := range queue {
						taken := []jetstream.Msg{first}
					fill:
						for len(taken) < batchMax {
							select {
							case m, ok := <-queue:
								if !ok {
									break fill
								}
								taken = append(taken, m)
							default:
								break fill
							}
						}
						msgs := make([]*nats.Msg, len(taken))
						for i, m := range taken {
							msgs[i] = receiptMsg(m)
						}
						pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
						_, err := publishAtomicSeqs(pctx, nc, naiveOut, msgs)
						pcancel()
						for _, m := range taken {
							if err != nil {
								_ = m.Nak()
							} else {
								_ = m.Ack()
							}
						}
						if err != nil {
							fail(err)
						}
					}
				})
			}
		}
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
				if batched {
					select {
					case queue <- msg:
					case <-done:
					}
					return
				}
				m := receiptMsg(msg)
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := js.PublishMsg(pctx, m, jetstream.WithMsgID("naive-"+nuid.Next()), jetstream.WithExpectStream(naiveOut))
				pcancel()
				if err != nil {
					fail(err)
					_ = msg.Nak()
					return
				}
				_ = msg.Ack()
			}()
		}, jetstream.PullMaxMessages(2*c))
		if err != nil {
			if queue != nil {
				close(queue)
				senders.Wait()
			}
			nc.Close()
			return nil, err
		}
		stops = append(stops, func() {
			close(done)
			cc.Stop()
			mu.Lock()
			stopped = true
			mu.Unlock()
			wg.Wait() // no handler starts after this, so none sends on queue
			if queue != nil {
				close(queue)
				senders.Wait()
			}
			nc.Close()
		})
	}
	name := "naive"
	if batched {
		name = "batched"
	}
	bar.begin(fmt.Sprintf("%s: %d×%d handlers", name, k, c), n)
	for {
		l, err := left()
		if err != nil {
			bar.end()
			return nil, err
		}
		bar.set(n - min(l, n))
		if l == 0 {
			break
		}
		failMu.Lock()
		f := failure
		failMu.Unlock()
		if f != nil {
			bar.end()
			return nil, f
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	bar.end()
	if batched {
		return &reference{name: "batched JetStream", n: n, took: took, unit: "messages/s",
			what: fmt.Sprintf("%d×%d handlers; consume, store %d-byte messages in atomic batches (up to %d, %d in flight), ack each after its batch's commit ack", k, c, len(receipt), batchMax, receiptBatchesInFlight)}, nil
	}
	return &reference{name: "naive JetStream", n: n, took: took, unit: "messages/s",
		what: fmt.Sprintf("%d×%d handlers; consume, publish one %d-byte message alone and wait for its ack, ack", k, c, len(receipt))}, nil
}
