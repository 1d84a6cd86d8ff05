package main

import "runtime/debug"

// serveGCPercent is the garbage collector's target (GOGC) of `provider
// serve` when the environment sets none. The service's Go heap is small:
// Pebble keeps its block cache and memtables outside it, so at Go's default
// of 100 the collector runs every few hundred create calls. With 400 the
// service's CPU per signed approval in a drain went from 56 to 46 µs (the
// medians of 5 alternating pairs; docs/PERFORMANCE-HISTORY.md), its peak
// resident memory from 66–68 to 82–91 MiB, still bounded by the block
// cache, the memtables and the intent filter (about 2.5 bytes per stored
// key).
const serveGCPercent = 400

// setServeGC sets the collector's target to serveGCPercent unless gogc, the
// environment's GOGC, chose one (the runtime read it at start), and returns
// the target in force.
func setServeGC(gogc string) int {
	if gogc != "" {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(serveGCPercent)
	return serveGCPercent
}
