package provider

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/benchcpu"
)

var benchCallers = []int{1, 8, 64}

// runCallers makes b.N calls from the given number of goroutines.
func runCallers(b *testing.B, callers int, call func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	for range callers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if err := call(i); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu.Report(b, "call")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// benchCreates runs "new" (a fresh intent per call) and "replay" (known
// intents) with 1, 8 and 64 callers against create.
func benchCreates(b *testing.B, create func(context.Context, CreateRequest) (CreateResponse, error)) {
	ctx := context.Background()
	run := 0
	for _, mode := range []string{"new", "replay"} {
		for _, callers := range benchCallers {
			b.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(b *testing.B) {
				run++
				prefix := fmt.Sprintf("bench-%s-%d-%d", mode, callers, run)
				const known = 256
				if mode == "replay" {
					for i := range known {
						if _, err := create(ctx, newRequest(fmt.Sprintf("%s-%d", prefix, i), "x")); err != nil {
							b.Fatal(err)
						}
					}
				}
				want := OutcomeCreated
				if mode == "replay" {
					want = OutcomeReplayed
				}
				runCallers(b, callers, func(i int) error {
					if mode == "replay" {
						i %= known
					}
					resp, err := create(ctx, newRequest(fmt.Sprintf("%s-%d", prefix, i), "x"))
					if err == nil && resp.Outcome != want {
						err = fmt.Errorf("outcome %s, want %s", resp.Outcome, want)
					}
					return err
				})
			})
		}
	}
}

// BenchmarkStoreCreate calls Store.Create in process.
func BenchmarkStoreCreate(b *testing.B) {
	st := openStore(b, b.TempDir(), Options{})
	benchCreates(b, st.Create)
}

// BenchmarkNATSCreate calls the service over NATS through Client, with up to
// eight client connections.
func BenchmarkNATSCreate(b *testing.B) {
	h := newHarness(b, Options{}, ServiceConfig{})
	clients := []*Client{h.client}
	for range 7 {
		clients = append(clients, NewClient(connect(b, h.url)))
	}
	var n atomic.Uint64
	benchCreates(b, func(ctx context.Context, req CreateRequest) (CreateResponse, error) {
		return clients[n.Add(1)%uint64(len(clients))].Create(ctx, req)
	})
}

// BenchmarkStoredIntents measures creates and replays with 10^3 and 10^6
// intents already stored, 8 callers. The 10^6 case takes a while to load
// and runs only when -bench names it (e.g. -bench 'StoredIntents/intents=1000000').
func BenchmarkStoredIntents(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("intents=%d", n), func(b *testing.B) {
			if n > 1_000 && (testing.Short() || !benchNamed(fmt.Sprint(n))) {
				b.Skipf("loading %d intents is slow; name it in -bench to run it", n)
			}
			dir := b.TempDir()
			start := time.Now()
			if err := preload(dir, n); err != nil {
				b.Fatal(err)
			}
			b.Logf("loaded %d intents in %v", n, time.Since(start).Round(time.Millisecond))
			st := openStore(b, dir, Options{})
			if got := st.Stats(); got != counts(int64(n), int64(n), int64(n)) {
				b.Fatalf("counts after preload %+v", got)
			}
			ctx := context.Background()
			run := 0
			b.Run("new", func(b *testing.B) {
				run++
				runCallers(b, 8, func(i int) error {
					resp, err := st.Create(ctx, newRequest(fmt.Sprintf("fresh-%d-%d", run, i), "x"))
					if err == nil && resp.Outcome != OutcomeCreated {
						err = fmt.Errorf("outcome %s", resp.Outcome)
					}
					return err
				})
			})
			b.Run("replay", func(b *testing.B) {
				runCallers(b, 8, func(i int) error {
					// Spread the replays over the whole stored key space.
					id := preloadIntent((i * 7919) % n)
					resp, err := st.Create(ctx, newRequest(id, id))
					if err == nil && resp.Outcome != OutcomeReplayed {
						err = fmt.Errorf("outcome %s", resp.Outcome)
					}
					return err
				})
			})
		})
	}
}

func benchNamed(s string) bool {
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), s)
}

func preloadIntent(i int) string { return PreloadIntent(i) }

func preload(dir string, n int) error { return Preload(dir, n) }
