package executor_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// ackSpy records the stream sequence of every ack or termination that any
// executor sends for the approvals consumer.
type ackSpy struct {
	mu    sync.Mutex
	acked map[uint64]string
}

func spyOnAcks(t *testing.T, nc *nats.Conn) *ackSpy {
	t.Helper()
	s := &ackSpy{acked: map[uint64]string{}}
	_, err := nc.Subscribe("$JS.ACK."+topology.ApprovalsStream+"."+topology.Consumer+".>", func(m *nats.Msg) {
		body := string(m.Data)
		if body != "" && body != "+ACK" && !strings.HasPrefix(body, "+TERM") {
			return // progress signals and naks finish nothing
		}
		if body == "" {
			body = "+ACK"
		}
		tok := strings.Split(m.Subject, ".")
		// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>
		// or, with domain and account hash, two tokens more before the stream.
		i := 5
		if len(tok) >= 12 {
			i = 7
		}
		seq, err := strconv.ParseUint(tok[i], 10, 64)
		if err != nil {
			t.Errorf("ack subject %q: %v", m.Subject, err)
			return
		}
		s.mu.Lock()
		s.acked[seq] = body
		s.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *ackSpy) snapshot() map[uint64]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]string, len(s.acked))
	for k, v := range s.acked {
		out[k] = v
	}
	return out
}

// publishApprovals stores n distinct approvals and returns their stream
// sequences.
func publishApprovals(t *testing.T, js jetstream.JetStream, prefix string, n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cand := scenario.Candidate()
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := 1; i <= n; i++ {
		a, err := scenario.Generate(cand, prefix, i)
		if err != nil {
			t.Fatal(err)
		}
		env := a.Envelope()
		f, err := js.PublishAsync(subjects.Approval("", document.Identify(env).IntentID), env)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	seqs := make([]uint64, 0, n)
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			seqs = append(seqs, ack.Sequence)
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("publishing the approvals timed out")
		}
	}
	return seqs
}

// TestAKilledReceiptBatchLeavesNoMessageAckedWithoutItsReceipt kills an
// executor process while a receipt batch is published but not yet
// acknowledged: once after the batch's first messages are published and
// before its commit (the stream abandons the batch: none of it is stored),
// once after the commit is published and before its ack arrives (the stream
// may have stored it; the executor never learns). Every ack any executor
// sent is watched on the wire. At the moment of the kill, and after a second
// executor has finished the work, every acked message has its receipt
// stored; the killed batch's messages were not acked and come back; each
// intent is created once.
func TestAKilledReceiptBatchLeavesNoMessageAckedWithoutItsReceipt(t *testing.T) {
	for _, point := range []executor.Point{executor.BatchStaged, executor.BatchCommitSent} {
		t.Run(string(point), func(t *testing.T) {
			env := testenv.Start(t)
			spy := spyOnAcks(t, env.NC)
			const n = 400
			seqs := publishApprovals(t, env.JS, "killed-batch", n)

			out := killedExecutor(t, env, point, 3, topology.Config{})
			t.Logf("%s", strings.TrimSpace(out))

			// Whatever the dead process sent has arrived once a round trip
			// through the server completes.
			if err := env.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			acked := spy.snapshot()
			stored, err := audit.ReceiptsBySeq(ctx, env.JS)
			if err != nil {
				t.Fatal(err)
			}
			if len(acked) == 0 || len(acked) >= n {
				t.Fatalf("%d of %d messages acked at the kill; want some, from the batches before the killed one, and not all", len(acked), n)
			}
			for seq := range acked {
				if len(stored[seq]) == 0 {
					t.Errorf("message %d was acked, but no receipt for it is stored", seq)
				}
			}
			var waiting int
			for _, seq := range seqs {
				if _, ok := acked[seq]; !ok {
					waiting++
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			t.Logf("at the kill: %d messages acked, each with its receipt stored; %d not acked; %d with a stored receipt",
				len(acked), waiting, len(stored))

			// A second executor finishes everything.
			env.Executor(executor.Config{ID: "exec-after"})
			var in *audit.Input
			deadline := time.Now().Add(60 * time.Second)
			for {
				in, err = audit.Load(ctx, env.NC)
				if err != nil {
					t.Fatal(err)
				}
				finished, all := finishedOf(in, seqs)
				if all {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the kill, %d of %d messages have a receipt (consumer %+v)", finished, n, in.Consumer)
				}
				time.Sleep(200 * time.Millisecond)
			}
			acked = spy.snapshot()
			for _, seq := range seqs {
				if _, ok := acked[seq]; !ok {
					t.Errorf("message %d has a receipt but was never acked", seq)
				}
			}
			for seq := range acked {
				if len(in.Receipts[seq]) == 0 {
					t.Errorf("message %d was acked, but no receipt for it is stored", seq)
				}
			}
			if rep := audit.Verify(in); !rep.OK {
				for _, c := range rep.Checks {
					if !c.OK {
						t.Errorf("verify: %s: %v", c.Name, c.Violations)
					}
				}
			}
			if in.Counts.CreatesExecuted != n || in.Counts.TasksExisting != n {
				t.Fatalf("counters %+v, want %d creates and tasks for %d intents", in.Counts, n, n)
			}
		})
	}
}

// On a RECEIPTS stream made without atomic batches (an older deployment,
// provisioned before they were used), the executor stores every receipt
// alone and loses nothing.
func TestWithoutAtomicBatchesOnTheStreamEveryReceiptIsStoredAlone(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, topology.ReceiptsStream); err != nil {
		t.Fatal(err)
	}
	old := topology.ReceiptsConfig(testenv.Topology)
	old.AllowAtomicPublish = false
	if _, err := env.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	const n = 120
	seqs := publishApprovals(t, env.JS, "no-atomic", n)
	ex, _ := env.Executor(executor.Config{ID: "exec-1", NoProvision: true})
	for {
		in, err := audit.Load(ctx, env.NC)
		if err != nil {
			t.Fatal(err)
		}
		finished, all := finishedOf(in, seqs)
		if all {
			// Every check holds but the one that compares the stream with
			// what was provisioned, which names the stream made behind
			// provisioning's back.
			rep := audit.Verify(in)
			for _, c := range rep.Checks {
				switch {
				case c.N == 13 && (c.OK || len(c.Violations) != 1 || c.Violations[0] != "stream RECEIPTS: allow_atomic: expected true, found false"):
					t.Fatalf("check 13: %v; want the one difference from what was provisioned", c.Violations)
				case c.N != 13 && !c.OK:
					t.Fatalf("check %d (%s) failed: %v", c.N, c.Name, c.Violations)
				}
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d messages have a receipt", finished, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if batches, _ := ex.ReceiptBatches(); batches != 0 {
		t.Fatalf("%d receipt batches stored on a stream that refuses them", batches)
	}
	if got := env.Counts(); got.CreatesExecuted != n {
		t.Fatalf("counters %+v, want %d creates", got, n)
	}
}

// waitForReceipts waits until every message in seqs has a receipt and the
// consumer has nothing left, and returns what verify reads.
// finishedOf counts the messages of seqs that have their receipt in in,
// and says whether all have and the consumer has nothing pending or
// waiting for an acknowledgement.
func finishedOf(in *audit.Input, seqs []uint64) (finished int, all bool) {
	for _, seq := range seqs {
		if len(in.Receipts[seq]) > 0 {
			finished++
		}
	}
	return finished, finished == len(seqs) && in.Consumer.Pending == 0 && in.Consumer.AckPending == 0
}

func waitForReceipts(t *testing.T, env *testenv.Env, seqs []uint64, within time.Duration) *audit.Input {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		in, err := audit.Load(ctx, env.NC)
		if err == nil {
			if _, all := finishedOf(in, seqs); all {
				return in
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("not every message finished within %s (last error %v)", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitClosed waits up to 30 seconds for ch to be closed and fails the
// test with why when it is not.
func waitClosed(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(why)
	}
}

// A receipt batch whose commit takes longer than AckWait: its deliveries
// keep signalling progress, so none is delivered again meanwhile.
func TestAReceiptWaitingLongerThanAckWaitForItsBatchIsNotDeliveredAgain(t *testing.T) {
	env := testenv.Start(t)
	topo := testenv.Topology
	topo.AckWait = time.Second
	var once sync.Once
	stalled := make(chan struct{})
	env.Executor(executor.Config{ID: "exec-1", Topology: topo, Fault: func(p executor.Point, _, _ uint64, _ string) {
		if p == executor.BatchCommitSent {
			once.Do(func() {
				time.Sleep(3 * topo.AckWait)
				close(stalled)
			})
		}
	}})
	const n = 60
	seqs := publishApprovals(t, env.JS, "slow-batch", n)
	waitClosed(t, stalled, "no receipt batch was ever committed")
	in := waitForReceipts(t, env, seqs, 30*time.Second)
	for _, seq := range seqs {
		if rs := in.Receipts[seq]; len(rs) != 1 || rs[0].Delivery.Delivered != 1 || rs[0].Outcome != document.OutcomeCreated {
			var got []string
			for _, r := range rs {
				got = append(got, fmt.Sprintf("%s on delivery %d", r.Outcome, r.Delivery.Delivered))
			}
			t.Errorf("message %d: receipts %v, want one created on the first delivery", seq, got)
		}
	}
	if in.Consumer.Redelivered != 0 || in.Consumer.Delivered != n {
		t.Fatalf("consumer %+v: messages were delivered again while their receipts waited", in.Consumer)
	}
}

// The RECEIPTS stream stops taking receipts while a large batch is staged
// (its subjects moved away, as if it were gone): the commit finds no stream,
// and every delivery of the batch is given back at once rather than each
// receipt tried alone against the same failure. Once the stream takes
// receipts again, every message finishes, each intent created once.
func TestWhenTheReceiptsStreamVanishesMidBatchEveryDeliveryIsGivenBackAtOnce(t *testing.T) {
	env := testenv.Start(t)
	topo := testenv.Topology
	topo.MaxDeliver, topo.NakDelay, topo.MaxNakDelay = 20, 500*time.Millisecond, time.Second
	var (
		mu      sync.Mutex
		retries []time.Time
		gone    time.Time
		staged  int
	)
	vanished := make(chan struct{})
	env.Executor(executor.Config{ID: "exec-1", Topology: topo, ReceiptBatchesInFlight: 1,
		OnRetry: func(uint64, error) {
			mu.Lock()
			retries = append(retries, time.Now())
			mu.Unlock()
		},
		Fault: func(p executor.Point, _, _ uint64, _ string) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case p == executor.BatchCommitSent && staged == 1:
				// Hold the first batch so that the next one grows large.
				time.Sleep(time.Second)
			case p == executor.BatchStaged:
				staged++
				if staged == 2 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					away := topology.ReceiptsConfig(topo)
					away.Subjects = []string{"elsewhere.>"}
					if _, err := env.JS.UpdateStream(ctx, away); err != nil {
						t.Errorf("moving the receipts stream away: %v", err)
					}
					gone = time.Now()
					close(vanished)
				}
			}
		}})
	const n = 120
	seqs := publishApprovals(t, env.JS, "vanished", n)
	waitClosed(t, vanished, "never reached a second receipt batch")
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	var soon int
	for _, at := range retries {
		if at.After(gone) && at.Before(gone.Add(time.Second)) {
			soon++
		}
	}
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.JS.UpdateStream(ctx, topology.ReceiptsConfig(topo)); err != nil {
		t.Fatal(err)
	}
	if soon < 10 {
		t.Errorf("%d deliveries given back within a second of the stream's loss; want the whole batch at once", soon)
	}
	in := waitForReceipts(t, env, seqs, 60*time.Second)
	for _, seq := range seqs {
		for _, r := range in.Receipts[seq] {
			if r.Outcome == document.OutcomeDeadLettered {
				t.Errorf("message %d was dead-lettered", seq)
			}
		}
	}
	if in.Counts.CreatesExecuted != n || in.Counts.TasksExisting != n {
		t.Fatalf("counters %+v, want %d creates and tasks", in.Counts, n)
	}
}

// A failed batch's receipts are stored alone, many at once; while the
// RECEIPTS stream takes nothing, the first failures end the attempt and the
// rest of the batch is given back untried, at once, instead of each waiting
// for the same failure.
func TestReceiptsStoredAloneStopAtTheFirstSystemicFailure(t *testing.T) {
	env := testenv.Start(t)
	const n = 256
	publishApprovals(t, env.JS, "alone", n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := fetchDeliveries(ctx, t, env.JS, n)
	away := topology.ReceiptsConfig(testenv.Topology)
	away.Subjects = []string{"elsewhere.>"}
	if _, err := env.JS.UpdateStream(ctx, away); err != nil {
		t.Fatal(err)
	}
	var retried atomic.Int64
	ex, _ := newExecutor(t, env, executor.Config{ID: "exec-1", Logger: testenv.Logger(), OnRetry: func(uint64, error) { retried.Add(1) }})
	start := time.Now()
	ex.StoreAlone(msgs)
	took := time.Since(start)
	if retried.Load() != n {
		t.Fatalf("%d of %d deliveries given back", retried.Load(), n)
	}
	// One wave of publishes fails after the client's own retries on no
	// responders (about half a second); trying every receipt would take a
	// wave per 64 receipts.
	if took > 1200*time.Millisecond {
		t.Fatalf("giving %d deliveries back took %s", n, took)
	}
	t.Logf("%d deliveries given back in %s", n, took.Round(time.Millisecond))
}

// batchServer is a real embedded server with one stream, BATCHES on
// batches.>, that allows atomic publish (or not).
func batchServer(t *testing.T, atomic bool) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	js := testenv.JetStream(t)
	nc := js.Conn()
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "BATCHES", Subjects: []string{"batches.>"}, AllowAtomicPublish: atomic}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func batchMsgs(n int) []*nats.Msg {
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = &nats.Msg{Subject: "batches." + strconv.Itoa(i), Data: []byte("m" + strconv.Itoa(i)), Header: nats.Header{"Keep": {"yes"}}}
	}
	return msgs
}

// A batch is stored whole, at consecutive sequences that the ack gives, and
// the messages handed in are not changed; a single message is published
// alone.
func TestPublishBatchStoresTheBatchWholeAndSaysWhere(t *testing.T) {
	nc, js := batchServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := executor.PublishBatch(ctx, nc, "BATCHES", batchMsgs(1)); err != nil {
		t.Fatalf("one message alone: %v", err)
	}
	msgs := batchMsgs(5)
	ack, err := executor.PublishBatch(ctx, nc, "BATCHES", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Count != 5 || ack.Stream != "BATCHES" {
		t.Errorf("ack %+v; want 5 messages on BATCHES", ack)
	}
	st, err := js.Stream(ctx, "BATCHES")
	if err != nil {
		t.Fatal(err)
	}
	seqs := ack.Seqs(5)
	for i, seq := range seqs {
		if seq != uint64(2+i) {
			t.Fatalf("sequences %v; want 2 to 6", seqs)
		}
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != "m"+strconv.Itoa(i) {
			t.Errorf("sequence %d holds %q; want message %d", seq, m.Data, i)
		}
	}
	for i, m := range msgs {
		if len(m.Header) != 1 || m.Header.Get("Keep") != "yes" {
			t.Errorf("message %d was changed: headers %v", i, m.Header)
		}
	}
}

// A stream that does not allow atomic publish refuses the batch with the
// server's error, and stores none of it.
func TestPublishBatchOnAStreamWithoutAtomicPublishStoresNothing(t *testing.T) {
	nc, js := batchServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := executor.PublishBatch(ctx, nc, "BATCHES", batchMsgs(3))
	if err == nil {
		t.Fatal("the batch was accepted")
	}
	s, err := js.Stream(ctx, "BATCHES")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

// BenchmarkReceiptBatch stores receipt-sized messages on a stream configured
// like RECEIPTS (file storage, fsync before every ack), in groups of N as
// the executor does: "alone=N" publishes each message of a group on its own,
// all at once, and waits for every ack (the executor's groups of up to
// AloneUpTo receipts, and the fallback for a failed batch); "batch=N"
// publishes the group as one atomic batch whose commit is a request. One op
// is one receipt stored; "ms/group" is the mean time to store a group. The
// server stages an atomic batch in a file store of its own, made and removed
// for each batch, so a small group is stored sooner alone.
func BenchmarkReceiptBatch(b *testing.B) {
	js := testenv.JetStream(b)
	nc := js.Conn()
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, topology.ReceiptsConfig(topology.Config{})); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 600)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	receipt := func(i int) *nats.Msg {
		m := nats.NewMsg(subjects.Receipt("", fmt.Sprintf("intent-bench-%07d", i)))
		m.Data = body
		m.Header.Set(topology.HeaderOutcome, "created")
		m.Header.Set(topology.HeaderStreamSeq, strconv.Itoa(i))
		m.Header.Set(topology.HeaderDelivered, "1")
		m.Header.Set(jetstream.MsgIDHeader, "receipt-"+nuid.Next())
		m.Header.Set(jetstream.ExpectedStreamHeader, topology.ReceiptsStream)
		return m
	}
	next := 0 // receipts differ across sub-benchmarks: no message id repeats
	groups := func(b *testing.B, size int, storeGroup func(first, n int)) {
		b.ReportAllocs()
		stored := 0
		for i := 0; i < b.N; i += size {
			n := min(size, b.N-i)
			storeGroup(next, n)
			next += n
			stored++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(max(stored, 1)), "ms/group")
	}
	for _, size := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("alone=%d", size), func(b *testing.B) {
			groups(b, size, func(first, n int) {
				var wg sync.WaitGroup
				for k := range n {
					wg.Go(func() {
						if _, err := js.PublishMsg(ctx, receipt(first+k)); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			})
		})
	}
	for _, size := range []int{2, 4, 8, 16, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			groups(b, size, func(first, n int) {
				msgs := make([]*nats.Msg, n)
				for k := range msgs {
					msgs[k] = receipt(first + k)
				}
				if _, err := executor.PublishBatch(ctx, nc, topology.ReceiptsStream, msgs); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
