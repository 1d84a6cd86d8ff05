package provider

import (
	"errors"
	"testing"
	"time"
)

func TestTheStatsReplySaysHowLongKeysAndRecordsAreKept(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		opts                         Options
		allowance, margin, retention time.Duration
	}{
		{name: "defaults keep keys 5m plus 1h past their not_after and records forever", allowance: 5 * time.Minute, margin: time.Hour},
		{name: "flags set the allowance, the margin and the retention",
			opts:      Options{KeyClockAllowance: time.Minute, KeyMargin: 2 * time.Minute, RecordsRetention: 48 * time.Hour},
			allowance: time.Minute, margin: 2 * time.Minute, retention: 48 * time.Hour},
		{name: "a negative allowance and margin mean none", opts: Options{KeyClockAllowance: -1, KeyMargin: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts, ServiceConfig{})
			info, err := h.client.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if info.Lifetime == nil {
				t.Fatal("the stats reply has no lifetime")
			}
			a, m, r, err := info.Lifetime.Durations()
			if err != nil || a != tc.allowance || m != tc.margin || r != tc.retention {
				t.Fatalf("lifetime %+v reads %v, %v, %v, %v; want %v, %v, %v", *info.Lifetime, a, m, r, err, tc.allowance, tc.margin, tc.retention)
			}
		})
	}
	t.Run("a lifetime that is not three durations is refused by name", func(t *testing.T) {
		_, _, _, err := Lifetime{KeyClockAllowance: "5m", KeyMargin: "an hour", RecordsRetention: "0s"}.Durations()
		if !errors.Is(err, ErrBadLifetime) {
			t.Fatalf("got %v, want ErrBadLifetime", err)
		}
	})
}
