package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// BenchmarkApprovalBatches stores approval-sized messages on a stream
// configured like APPROVALS (file storage, fsync before every ack) as the
// live publishers do: atomic batches of 50, from 1 or 4 publishers each
// waiting for its batch's commit before sending the next. One op is one
// approval stored; "ms/commit" is the mean wait for a commit's ack. The
// stream commits the batches one after another, so more publishers wait
// longer each for about the same throughput.
func BenchmarkApprovalBatches(b *testing.B) {
	nc, js := testenv.Connect(b, testenv.NATS(b))
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, topology.ApprovalsConfig(topology.Config{})); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1500)
	const size = 50
	for _, publishers := range []int{1, 4} {
		b.Run(fmt.Sprintf("publishers=%d", publishers), func(b *testing.B) {
			var mu sync.Mutex
			var waited time.Duration
			commits := 0
			var wg sync.WaitGroup
			per := max(b.N/(publishers*size), 1)
			b.ResetTimer()
			for p := range publishers {
				wg.Go(func() {
					for k := range per {
						msgs := make([]*nats.Msg, size)
						for i := range msgs {
							msgs[i] = &nats.Msg{Subject: subjects.Approval("", fmt.Sprintf("intent-%d-%d-%d", p, k, i)), Data: body}
						}
						t0 := time.Now()
						if _, err := publishAtomicSeqs(ctx, nc, topology.ApprovalsStream, msgs); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						waited += time.Since(t0)
						commits++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			stored := publishers * per * size
			b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "approvals/s")
			b.ReportMetric(float64(waited.Microseconds())/1000/float64(max(commits, 1)), "ms/commit")
		})
	}
}
