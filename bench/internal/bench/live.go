package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// liveResult is one live run.
type liveResult struct {
	rate      Rate
	offered   float64 // approvals a second asked for
	achieved  float64 // approvals a second published
	executors int
	n         int
	lat       []time.Duration // sorted
	check     *checkResult
	// stages split the latency of stagesN approvals (see stageClock).
	stages  []stageFigure
	stagesN int
}

func (l *liveResult) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	i := int(float64(len(l.lat)-1)*p + 0.5)
	return l.lat[i]
}

// runLive measures publish→receipt latency at each rate; a "half" rate
// first measures the maximum with a backlog drain. With an embedded server,
// each measurement gets a fresh stack, so that the background work one
// leaves behind (the service's memtable flushes and compactions, above all)
// does not fall into the next.
func runLive(ctx context.Context, o *Options, st *stages, rep *report) error {
	k := o.Executors[0]
	var s *stack
	after := "the references"
	fresh := func() error {
		if s != nil && !o.Embedded {
			return nil
		}
		if s != nil {
			if now, peak, ok := s.serviceMemory(); ok {
				rep.memory = append(rep.memory, memoryFigure{preload: s.preload, after: after, now: now, peak: peak})
			}
			s.close()
		}
		var err error
		s, err = startStack(ctx, o, o.Preload[0], st)
		return err
	}
	defer func() {
		if s != nil {
			if now, peak, ok := s.serviceMemory(); ok {
				rep.memory = append(rep.memory, memoryFigure{preload: s.preload, after: after, now: now, peak: peak})
			}
			s.close()
		}
	}()
	if err := fresh(); err != nil {
		return err
	}
	if !o.NoReferences {
		if err := measureReferences(ctx, s, st, rep); err != nil {
			return err
		}
	}
	var maxRate float64
	for i, r := range o.Rates {
		rate := r.PerSecond
		if r.HalfOfMax {
			if maxRate == 0 {
				if err := fresh(); err != nil {
					return err
				}
				d, err := s.drain(ctx, k, fmt.Sprintf("%s-max-e%d", o.run, k), st)
				if d != nil {
					rep.drains = append(rep.drains, d)
				}
				if err != nil {
					return err
				}
				maxRate = d.rate()
				after = "the drain that found the maximum"
			}
			rate = maxRate / 2
		}
		if err := fresh(); err != nil {
			return err
		}
		l, err := s.live(ctx, k, r, rate, fmt.Sprintf("%s-live%d-e%d", o.run, i, k), st)
		after = "live at " + thousands(rate) + "/s"
		if l != nil {
			rep.lives = append(rep.lives, l)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// live offers approvals at rate for the run's duration from K publishers
// and measures, for each, the time from its scheduled publish to its first
// terminal receipt being delivered from the RECEIPTS stream. A publisher
// that finds several approvals due at once stores them as one atomic batch.
// Latency counts from the schedule, not from the actual publish, so a
// publisher that falls behind shows as latency.
func (s *stack) live(ctx context.Context, k int, r Rate, rate float64, prefix string, st *stages) (*liveResult, error) {
	o := s.o
	n := max(int(rate*o.Duration.Seconds()+0.5), 1)
	label := fmt.Sprintf("at %s/s, %d executor(s)", thousands(rate), k)
	end := st.begin("generate " + fmt.Sprint(n) + " approvals " + label)
	w, err := generate(workloadSpec{N: n, Resend: o.Resend, Conflict: o.Conflict, Payload: o.Payload,
		Prefix: prefix, Key: o.key, Now: time.Now(), ApprovalTimeout: 24 * time.Hour, Seed: uint64(n)})
	if err != nil {
		return nil, err
	}
	end()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	m, err := s.mark(ctx)
	if err != nil {
		return nil, err
	}
	clock := newStageClock(m.approval, n)
	s.clock = clock
	stop, err := s.executors(k)
	s.clock = nil
	if err != nil {
		return nil, err
	}
	defer stop()
	arr, err := s.watchReceipts(ctx, m, n)
	if err != nil {
		return nil, err
	}
	defer arr.stop()

	end = st.begin("live " + label)
	bar := newProgress(o.Status, o.Terminal)
	bar.begin("live "+thousands(rate)+"/s", n)
	sched := newSchedule(rate)
	go arr.show(ctx, bar)
	pub, err := s.offer(ctx, w, sched)
	if err == nil {
		err = arr.await(ctx, o.Duration+2*time.Minute)
	}
	if err != nil {
		bar.end()
		return nil, err
	}
	bar.set(n)
	bar.end()
	end()
	arr.stop()
	stop()

	l := liveFigures(r, rate, k, pub, sched, arr, clock)
	end = st.begin("check " + label)
	l.check, err = s.verify(ctx, w, pub.seqs, m.receipt+1, m.counts, m.retried)
	end()
	return l, err
}

// runMark is where a measurement starts: the service's counters and the
// last sequences of the receipts and approvals streams, and the calls the
// executors had retried.
type runMark struct {
	counts            provider.Counts
	receipt, approval uint64
	retried           int64
}

// mark reads where a measurement starts.
func (s *stack) mark(ctx context.Context) (runMark, error) {
	m := runMark{retried: s.retried.Load()}
	var err error
	if m.counts, err = s.counts(ctx); err != nil {
		return m, fmt.Errorf("bench: reading the service's counters: %w", err)
	}
	if m.receipt, err = s.lastSeq(ctx, topology.ReceiptsStream); err != nil {
		return m, err
	}
	if m.approval, err = s.lastSeq(ctx, topology.ApprovalsStream); err != nil {
		return m, err
	}
	return m, nil
}

// arrivals are the first terminal receipts of the approvals stored after
// the mark, as they become readable, by approval sequence.
type arrivals struct {
	mu      sync.Mutex
	at      map[uint64]time.Time
	seen    atomic.Int64
	n       int
	allSeen chan struct{}
	once    sync.Once
	cc      jetstream.ConsumeContext
	stopped sync.Once
}

// watchReceipts follows the receipts stored after the mark until all n
// approvals have a terminal one.
func (s *stack) watchReceipts(ctx context.Context, m runMark, n int) (*arrivals, error) {
	a := &arrivals{at: map[uint64]time.Time{}, n: n, allSeen: make(chan struct{})}
	cons, err := s.js.OrderedConsumer(ctx, topology.ReceiptsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: m.receipt + 1, HeadersOnly: true,
	})
	if err != nil {
		return nil, err
	}
	a.cc, err = cons.Consume(func(msg jetstream.Msg) {
		at := time.Now()
		seq, ok := storedmsg.Ends(msg.Headers())
		if !ok || seq <= m.approval {
			return
		}
		a.mu.Lock()
		if _, dup := a.at[seq]; !dup {
			a.at[seq] = at
			if a.seen.Add(1) == int64(a.n) {
				a.once.Do(func() { close(a.allSeen) })
			}
		}
		a.mu.Unlock()
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (a *arrivals) stop() { a.stopped.Do(a.cc.Stop) }

// show moves the progress bar until every receipt has arrived.
func (a *arrivals) show(ctx context.Context, bar *progress) {
	for {
		select {
		case <-a.allSeen:
			return
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
			bar.set(int(a.seen.Load()))
		}
	}
}

// await waits until every receipt has arrived, for up to wait.
func (a *arrivals) await(ctx context.Context, wait time.Duration) error {
	select {
	case <-a.allSeen:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("bench: only %d of %d receipts arrived", a.seen.Load(), a.n)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// schedule says when each approval of a live run is due: one every
// interval from t0.
type schedule struct {
	t0       time.Time
	interval time.Duration
}

func newSchedule(rate float64) schedule {
	return schedule{t0: time.Now().Add(50 * time.Millisecond), interval: time.Duration(float64(time.Second) / rate)}
}

func (s schedule) at(i int) time.Time { return s.t0.Add(time.Duration(i) * s.interval) }

// published is what the publishers of a live run did: the stream sequence
// of each approval, when its batch was acknowledged, and the last such time.
type published struct {
	seqs []uint64
	at   []int64
	last atomic.Int64
}

// offer publishes the workload on its schedule from the run's publishers,
// each taking every Publishers-th approval; a publisher that finds several
// due at once stores them as one atomic batch, and takes the next once the
// stream acknowledged it. Approvals falling due meanwhile wait and go in the
// next batch, so batches are as large as the load makes them. One
// publisher is the default: the stream commits atomic batches one after
// another, each with a fixed cost (nats-server stages every batch in a
// store of its own), so batches from several publishers queue behind each
// other and an approval waits for theirs as well as its own.
func (s *stack) offer(ctx context.Context, w *Workload, sched schedule) (*published, error) {
	n := len(w.Envelopes)
	pub := &published{seqs: make([]uint64, n), at: make([]int64, n)}
	var wg sync.WaitGroup
	var pubErr error
	var pubMu sync.Mutex
	publishers := min(s.o.Publishers, n)
	for p := range publishers {
		wg.Go(func() {
			if err := s.publishEvery(ctx, w, sched, p, publishers, pub); err != nil {
				pubMu.Lock()
				if pubErr == nil {
					pubErr = err
				}
				pubMu.Unlock()
			}
		})
	}
	wg.Wait()
	return pub, pubErr
}

// publishEvery publishes approvals p, p+step, … as they fall due.
func (s *stack) publishEvery(ctx context.Context, w *Workload, sched schedule, p, step int, pub *published) error {
	n := len(w.Envelopes)
	for i := p; i < n; {
		time.Sleep(time.Until(sched.at(i)))
		now := time.Now()
		var idx []int
		for ; i < n && !sched.at(i).After(now) && len(idx) < 1000; i += step {
			idx = append(idx, i)
		}
		msgs := make([]*nats.Msg, len(idx))
		for j, x := range idx {
			msgs[j] = &nats.Msg{Subject: w.Subjects[x], Data: w.Envelopes[x], Header: nats.Header{}}
		}
		got, err := publishGroup(ctx, s.nc, topology.ApprovalsStream, msgs)
		if err != nil {
			return err
		}
		at := time.Now().UnixNano()
		for j, x := range idx {
			pub.seqs[x] = got[j]
			pub.at[x] = at
		}
		pub.last.Store(at)
	}
	return nil
}

// liveFigures computes a live run's figures: the rate achieved, each
// approval's latency from its schedule to its receipt, and the stages.
func liveFigures(r Rate, rate float64, k int, pub *published, sched schedule, arr *arrivals, clock *stageClock) *liveResult {
	n := len(pub.seqs)
	l := &liveResult{rate: r, offered: rate, executors: k, n: n}
	if el := time.Unix(0, pub.last.Load()).Sub(sched.t0).Seconds(); el > 0 {
		l.achieved = float64(n) / el
	}
	arr.mu.Lock()
	l.lat = make([]time.Duration, 0, n)
	for i, seq := range pub.seqs {
		l.lat = append(l.lat, arr.at[seq].Sub(sched.at(i)))
	}
	l.stages, l.stagesN = clock.liveStages(pub.seqs, sched.at, pub.at, arr.at)
	arr.mu.Unlock()
	slices.Sort(l.lat)
	return l
}
