// Package benchcpu reports what a Go benchmark's operations cost in CPU
// time, the figure the bench's A/B states per approval: the process's user
// and system time over the timed loop, divided by b.N. Wall time per
// operation says the same only for a benchmark on one goroutine; the
// service's create benchmarks run 64 callers at once.
//
// It is a test rig: it must never be imported by a production package.
// It must never import anything but the standard library.
package benchcpu
