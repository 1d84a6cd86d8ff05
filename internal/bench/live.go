package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
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
	before, err := s.svc.Stats(ctx)
	if err != nil {
		return nil, err
	}
	fromReceipt, err := s.lastSeq(ctx, topology.ReceiptsStream)
	if err != nil {
		return nil, err
	}
	fromApproval, err := s.lastSeq(ctx, topology.ApprovalsStream)
	if err != nil {
		return nil, err
	}
	clock := newStageClock(fromApproval, n)
	s.clock = clock
	stop, err := s.executors(k)
	s.clock = nil
	if err != nil {
		return nil, err
	}
	defer stop()

	// Receipts as they become readable.
	arrived := map[uint64]time.Time{}
	var seen atomic.Int64
	allSeen := make(chan struct{})
	var closeOnce sync.Once
	cons, err := s.js.OrderedConsumer(ctx, topology.ReceiptsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: fromReceipt + 1, HeadersOnly: true,
	})
	if err != nil {
		return nil, err
	}
	var arrMu sync.Mutex
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now()
		seq, _ := strconv.ParseUint(m.Headers().Get(topology.HeaderStreamSeq), 10, 64)
		if seq <= fromApproval || !document.Terminal(m.Headers().Get(topology.HeaderOutcome)) {
			return
		}
		arrMu.Lock()
		if _, dup := arrived[seq]; !dup {
			arrived[seq] = at
			if seen.Add(1) == int64(n) {
				closeOnce.Do(func() { close(allSeen) })
			}
		}
		arrMu.Unlock()
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		return nil, err
	}
	defer cc.Stop()

	end = st.begin("live " + label)
	bar := newProgress(o.Status, o.Terminal)
	bar.begin("live "+thousands(rate)+"/s", n)
	seqs := make([]uint64, n)
	published := make([]int64, n) // when each approval's batch was acknowledged
	interval := time.Duration(float64(time.Second) / rate)
	t0 := time.Now().Add(50 * time.Millisecond)
	sched := func(i int) time.Time { return t0.Add(time.Duration(i) * interval) }
	var wg sync.WaitGroup
	var pubErr error
	var pubMu sync.Mutex
	var lastPublish atomic.Int64
	publishers := min(o.Publishers, n)
	for p := range publishers {
		wg.Go(func() {
			for i := p; i < n; {
				time.Sleep(time.Until(sched(i)))
				now := time.Now()
				var idx []int
				for ; i < n && !sched(i).After(now) && len(idx) < 1000; i += publishers {
					idx = append(idx, i)
				}
				msgs := make([]*nats.Msg, len(idx))
				for j, x := range idx {
					msgs[j] = &nats.Msg{Subject: w.Subjects[x], Data: w.Envelopes[x], Header: nats.Header{}}
				}
				got, err := publishAtomicSeqs(ctx, s.nc, topology.ApprovalsStream, msgs)
				if err != nil {
					pubMu.Lock()
					if pubErr == nil {
						pubErr = err
					}
					pubMu.Unlock()
					return
				}
				at := time.Now().UnixNano()
				for j, x := range idx {
					seqs[x] = got[j]
					published[x] = at
				}
				lastPublish.Store(at)
			}
		})
	}
	go func() {
		for {
			select {
			case <-allSeen:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
				bar.set(int(seen.Load()))
			}
		}
	}()
	wg.Wait()
	if pubErr != nil {
		bar.end()
		return nil, pubErr
	}
	lastPublished := time.Unix(0, lastPublish.Load())
	select {
	case <-allSeen:
	case <-time.After(o.Duration + 2*time.Minute):
		bar.end()
		return nil, fmt.Errorf("bench: only %d of %d receipts arrived", seen.Load(), n)
	case <-ctx.Done():
		bar.end()
		return nil, ctx.Err()
	}
	bar.set(n)
	bar.end()
	end()
	cc.Stop()
	stop()

	l := &liveResult{rate: r, offered: rate, executors: k, n: n}
	if el := lastPublished.Sub(t0).Seconds(); el > 0 {
		l.achieved = float64(n) / el
	}
	arrMu.Lock()
	l.lat = make([]time.Duration, 0, n)
	for i, seq := range seqs {
		l.lat = append(l.lat, arrived[seq].Sub(sched(i)))
	}
	l.stages, l.stagesN = clock.liveStages(seqs, sched, published, arrived)
	arrMu.Unlock()
	slices.Sort(l.lat)
	end = st.begin("check " + label)
	l.check, err = s.verify(ctx, w, seqs, fromReceipt+1, before)
	end()
	return l, err
}
