package provider

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// soakEnv, when set to a number of intents, runs TestSoakKeysAndRecordsStayBounded
// with that many (at least 10^6 for the figures in docs/PERFORMANCE.md).
const soakEnv = "SENDTWICE_SOAK_INTENTS"

// TestSoakKeysAndRecordsStayBounded pushes many intents with short
// approval lifetimes through the store, with an injected clock, over
// several compaction cycles: each cycle creates its share of intents (one
// in ten resent once), moves the clock past their keys' keep_until and the
// records retention, and compacts. It reports per cycle the live keys and
// the store's size on disk, and checks that the live keys after each
// compaction are none of the earlier cycles' (bounded by one cycle's
// intents) while every task stays. Run it with
//
//	SENDTWICE_SOAK_INTENTS=1000000 go test -run TestSoakKeysAndRecordsStayBounded -v -timeout 30m ./internal/provider/
func TestSoakKeysAndRecordsStayBounded(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv(soakEnv))
	if total <= 0 {
		t.Skipf("a soak run: set %s to the number of intents (1000000 for docs/PERFORMANCE.md)", soakEnv)
	}
	const cycles, workers = 8, 64
	lifetime, allowance, margin, retention := time.Minute, 5*time.Minute, time.Hour, time.Hour
	clock := newTestClock()
	dir := t.TempDir()
	st := openStore(t, dir, Options{Clock: clock.Now, KeyClockAllowance: allowance, KeyMargin: margin,
		RecordsRetention: retention, CompactEvery: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	per := total / cycles
	t.Logf("%d intents in %d cycles of %d; approval lifetime %s, allowance %s, margin %s, records retention %s",
		per*cycles, cycles, per, lifetime, allowance, margin, retention)
	t.Logf("%5s %9s %10s %10s %10s %10s %12s %12s %12s %12s %12s %9s", "cycle", "intents", "live before", "live after", "compacted", "retired",
		"tasks", "disk MiB", "keys MiB", "records MiB", "tasks MiB", "took")
	for c := range cycles {
		start := time.Now()
		notAfter := clock.Now().Add(lifetime)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < per; i += workers {
					req, err := NewScopedRequest(fmt.Sprintf("s%d", i%4), fmt.Sprintf("soak-%d-%08d", c, i), Task{Title: "soak"})
					if err != nil {
						errs <- err
						return
					}
					req.NotAfter = notAfter.UTC().Format(time.RFC3339)
					outcomes := []string{OutcomeCreated}
					if i%10 == 0 {
						outcomes = append(outcomes, OutcomeReplayed) // one in ten is resent
					}
					for _, want := range outcomes {
						resp, err := st.Create(ctx, req)
						if err == nil && resp.Outcome != want {
							err = fmt.Errorf("intent %s: %s, want %s", req.IntentID, resp.Outcome, want)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		peak, _ := st.KeyStats()
		clock.Advance(lifetime + allowance + margin + retention/2 + time.Second)
		if _, err := st.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		keys, _ := st.KeyStats()
		if keys.Live != 0 {
			t.Errorf("cycle %d: %d keys live after every approval expired and compaction ran", c, keys.Live)
		}
		m := st.db.Metrics()
		usage := func(lo, hi byte) float64 {
			n, err := st.db.EstimateDiskUsage([]byte{lo}, []byte{hi})
			if err != nil {
				t.Fatal(err)
			}
			return float64(n) / (1 << 20)
		}
		keysMiB := usage(prefixExpiry, prefixExpiry+1) + usage(prefixIntent, prefixIntent+1) + usage(prefixIntentOrder, prefixIntentOrder+1)
		recordsMiB := usage(prefixCreate, prefixCreate+1) + usage(prefixRequest, prefixRequest+1)
		// The tasks never go (compaction keeps them), nor their index entries.
		tasksMiB := usage(prefixTask, prefixTask+1) + usage(prefixIndex, prefixIndex+1)
		t.Logf("%5d %9d %10d %10d %10d %10d %12d %12.1f %12.1f %12.1f %12.1f %9s", c, per*(c+1), peak.Live, keys.Live, keys.Compacted, keys.RecordsRetired,
			st.Stats().TasksExisting, float64(m.DiskSpaceUsage())/(1<<20), keysMiB, recordsMiB, tasksMiB, time.Since(start).Round(time.Millisecond))
	}
	if c := st.Stats(); c.TasksExisting != int64(per*cycles) || c.CreatesExecuted != int64(per*cycles) {
		t.Errorf("counts %+v; want %d creates and tasks: compaction never deletes a task", c, per*cycles)
	}
}
