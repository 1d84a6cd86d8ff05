package main

import (
	"runtime/debug"
	"testing"
)

func TestServeSetsTheCollectorsTargetUnlessGOGCIsSet(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100) })
	for _, tc := range []struct {
		name string
		gogc string // the environment's GOGC; "" = unset
		want int
	}{
		{"without GOGC the service collects at its own target", "", serveGCPercent},
		{"GOGC set by the environment is kept", "150", 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			if tc.gogc != "" {
				debug.SetGCPercent(150) // as the runtime read it from GOGC at start
			}
			if got := setServeGC(tc.gogc); got != tc.want {
				t.Errorf("setServeGC(%q) = %d, want %d", tc.gogc, got, tc.want)
			}
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("the collector's target is %d, want %d", got, tc.want)
			}
		})
	}
}
