package benchcpu

import (
	"crypto/sha256"
	"testing"
)

// A loop that hashes costs CPU, and the meter reports it per operation:
// more than nothing, and no more than the wall time of a loop on one
// goroutine (with a margin for the runtime's own threads).
func TestTheMeterReportsTheLoopsCPUPerOperation(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		data := make([]byte, 64<<10)
		m := Start()
		for b.Loop() {
			sha256.Sum256(data)
		}
		m.Report(b, "op")
	})
	cpu := res.Extra["cpu-µs/op"]
	wall := float64(res.NsPerOp()) / 1e3
	if cpu <= 0 || cpu > 2*wall {
		t.Fatalf("cpu-µs/op %.2f against %.2f µs/op of wall time: want more than 0 and at most twice it", cpu, wall)
	}
}
