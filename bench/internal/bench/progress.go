package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress draws a bar on a terminal; elsewhere it stays silent.
type progress struct {
	w     io.Writer
	on    bool
	mu    sync.Mutex
	label string
	total int
	start time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, on bool) *progress { return &progress{w: w, on: on && w != nil} }

// begin starts a bar for total units.
func (p *progress) begin(label string, total int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.total, p.start, p.last, p.drawn = label, total, time.Now(), time.Time{}, false
}

// set draws the bar at done units (at most ten times a second).
func (p *progress) set(done int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && done < p.total {
		return
	}
	p.last = now
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = min(float64(done)/float64(p.total), 1)
	}
	fill := int(frac * width)
	rate := 0.0
	if el := now.Sub(p.start).Seconds(); el > 0 {
		rate = float64(done) / el
	}
	fmt.Fprintf(p.w, "\r%-22s [%s%s] %3.0f%% %d/%d %s/s ", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		frac*100, done, p.total, thousands(rate))
	p.drawn = true
}

// end clears the bar.
func (p *progress) end() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 100))
	}
	p.drawn = false
}

// thousands renders a rate with thousands separators and no decimals.
func thousands(v float64) string {
	n := int64(v + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
