package bench

import (
	"testing"
	"time"
)

// Each approval's latency is split at the points recorded; an approval with
// a point missing is left out, and the stages of one add up to its total.
func TestLiveStagesSplitTheLatency(t *testing.T) {
	c := newStageClock(100, 3)
	t0 := time.Unix(1000, 0)
	ms := func(n int) int64 { return t0.Add(time.Duration(n) * time.Millisecond).UnixNano() }
	sched := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	seqs := []uint64{101, 102, 103}
	published := []int64{ms(2), ms(3), ms(4)}
	arrived := map[uint64]time.Time{}
	for i, seq := range seqs[:2] {
		c.mark(c.taken, seq, ms(i+5))
		c.mark(c.callStart, seq, ms(i+6))
		c.mark(c.callEnd, seq, ms(i+10))
		c.mark(c.acked, seq, ms(i+20))
		arrived[seq] = time.Unix(0, ms(i+19)) // read before the ack
	}
	c.mark(c.taken, 101, ms(99)) // a later handling does not move the first's points
	c.mark(c.taken, 999, ms(1))  // not one of the run's sequences
	figs, n := c.liveStages(seqs, sched, published, arrived)
	if n != 2 {
		t.Fatalf("%d approvals included, want 2 (the third has no points)", n)
	}
	want := []time.Duration{2, 3, 1, 4, 10, -1, 19} // ms, for both approvals
	for i, f := range figs {
		if len(f.lat) != 2 || f.mean != want[i]*time.Millisecond || f.pct(0.5) != want[i]*time.Millisecond {
			t.Errorf("stage %q: %v, mean %v; want %v ms", f.name, f.lat, f.mean, want[i])
		}
	}
}
