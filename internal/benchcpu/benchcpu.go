package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Meter measures the CPU time of a benchmark's timed loop.
type Meter struct{ start time.Duration }

// Start starts measuring; call it where the timer starts (after setup,
// with or just after b.ResetTimer).
func Start() Meter { return Meter{start: processCPU()} }

// Report reports the CPU time used since Start per operation, in
// microseconds, as the metric "cpu-µs/"+per ("cpu-µs/approval").
func (m Meter) Report(b *testing.B, per string) {
	b.Helper()
	if b.N == 0 {
		return
	}
	used := processCPU() - m.start
	b.ReportMetric(float64(used.Nanoseconds())/1e3/float64(b.N), "cpu-µs/"+per)
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
