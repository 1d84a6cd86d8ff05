package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
)

// stageClock records, in a live run, when each approval passes the points
// that the bench can see without changing the executor: the executor's
// task service (wrapped, so the call's start and end) and its OnReceipt hook
// (after the ack, with the time since the handler took the delivery). Each
// point is kept for the first handling that reaches it, by the approval's
// stream sequence.
type stageClock struct {
	base uint64 // the sequences measured are base+1 .. base+n
	n    int
	// Unix nanoseconds.
	taken, callStart, callEnd, acked []int64
}

func newStageClock(base uint64, n int) *stageClock {
	return &stageClock{base: base, n: n,
		taken: make([]int64, n), callStart: make([]int64, n), callEnd: make([]int64, n), acked: make([]int64, n)}
}

func (c *stageClock) mark(slot []int64, seq uint64, at int64) {
	if seq <= c.base || seq > c.base+uint64(c.n) {
		return
	}
	atomic.CompareAndSwapInt64(&slot[seq-c.base-1], 0, at)
}

// service wraps the executor's task service to time each call.
func (c *stageClock) service(svc taskservice.Service) taskservice.Service {
	return taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		start := time.Now().UnixNano()
		res, err := svc.Create(ctx, req)
		end := time.Now().UnixNano()
		if err == nil {
			// The call reference is "APPROVALS:<stream seq>:<delivery>:<attempt>".
			if f := strings.SplitN(req.CallRef, ":", 3); len(f) == 3 {
				if seq, perr := strconv.ParseUint(f[1], 10, 64); perr == nil {
					c.mark(c.callStart, seq, start)
					c.mark(c.callEnd, seq, end)
				}
			}
		}
		return res, err
	})
}

// receipt is the executor's OnReceipt hook: the message is acked, and took
// is the time since a handler took the delivery.
func (c *stageClock) receipt(r *document.Receipt, took time.Duration) {
	now := time.Now().UnixNano()
	c.mark(c.acked, r.Delivery.StreamSeq, now)
	c.mark(c.taken, r.Delivery.StreamSeq, now-int64(took))
}

// stageFigure is one stage's latency over a live run's approvals.
type stageFigure struct {
	name string
	lat  []time.Duration // sorted
	mean time.Duration
}

func (s *stageFigure) pct(p float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return s.lat[int(float64(len(s.lat)-1)*p+0.5)]
}

// liveStages splits each approval's latency into its stages. sched,
// published and arrived are the bench's own points (scheduled publish, the
// approval's batch acknowledged by the stream, its receipt read); seqs are
// the approvals' stream sequences. Approvals with a point missing (a
// handling that did not finish, which the check reports) are left out; the
// count of those included is returned.
func (c *stageClock) liveStages(seqs []uint64, sched func(int) time.Time, published []int64, arrived map[uint64]time.Time) ([]stageFigure, int) {
	names := []string{
		"scheduled → approval stored (the publisher's batch)",
		"stored → taken by a handler",
		"gate (taken → service call)",
		"service call (request → answer)",
		"receipt queued, stored in a batch, message acked",
		"acked → receipt read by the bench (< 0: read before the ack)",
		"total: scheduled → receipt read",
	}
	figs := make([]stageFigure, len(names))
	for i := range figs {
		figs[i].name = names[i]
	}
	sums := make([]time.Duration, len(names))
	included := 0
	for i, seq := range seqs {
		if seq <= c.base || seq > c.base+uint64(c.n) {
			continue
		}
		k := seq - c.base - 1
		at, ok := arrived[seq]
		points := []int64{sched(i).UnixNano(), published[i], c.taken[k], c.callStart[k], c.callEnd[k], c.acked[k], at.UnixNano()}
		if !ok || slices.Contains(points, 0) {
			continue
		}
		included++
		for j := range len(points) - 1 {
			d := time.Duration(points[j+1] - points[j])
			figs[j].lat = append(figs[j].lat, d)
			sums[j] += d
		}
		total := time.Duration(points[len(points)-1] - points[0])
		figs[len(figs)-1].lat = append(figs[len(figs)-1].lat, total)
		sums[len(figs)-1] += total
	}
	for i := range figs {
		slices.Sort(figs[i].lat)
		if included > 0 {
			figs[i].mean = sums[i] / time.Duration(included)
		}
	}
	return figs, included
}

// stagesHeader introduces a live run's stages in the report.
func stagesHeader(l *liveResult) string {
	offered := thousands(l.offered) + "/s"
	if l.rate.HalfOfMax {
		offered += " (half of max)"
	}
	return fmt.Sprintf("latency per stage at %s (%d of %d approvals; the means add up to the total's):", offered, l.stagesN, l.n)
}
