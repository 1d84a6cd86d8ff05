package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The live publisher stores a few messages each alone and more as one atomic
// batch, as the executor stores receipts, and gives each message's stream
// sequence either way.
func TestAGroupOfAFewMessagesIsStoredAloneAndALargerOneInOneBatch(t *testing.T) {
	nc, js := testenv.Connect(t, testenv.NATS(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateOrUpdateStream(ctx, topology.ApprovalsConfig(topology.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n         int
		wantBatch bool
	}{
		{executor.AloneUpTo, false},
		{executor.AloneUpTo + 1, true},
	} {
		t.Run(fmt.Sprintf("%d messages", tc.n), func(t *testing.T) {
			msgs := make([]*nats.Msg, tc.n)
			for i := range msgs {
				msgs[i] = &nats.Msg{Subject: subjects.Approval("", fmt.Sprintf("intent-%d-%d", tc.n, i)), Data: []byte("approval")}
			}
			seqs, err := publishGroup(ctx, nc, topology.ApprovalsStream, msgs)
			if err != nil {
				t.Fatal(err)
			}
			batches := map[string]int{}
			for i, seq := range seqs {
				m, err := s.GetMsg(ctx, seq)
				if err != nil {
					t.Fatalf("message %d at %d: %v", i, seq, err)
				}
				if m.Subject != msgs[i].Subject {
					t.Errorf("message %d: sequence %d holds %s", i, seq, m.Subject)
				}
				batches[m.Header.Get("Nats-Batch-Id")]++
			}
			_, alone := batches[""]
			if len(batches) != 1 || alone == tc.wantBatch {
				t.Errorf("messages per atomic batch (\"\": stored alone) %v; want all %d in one batch: %v", batches, tc.n, tc.wantBatch)
			}
		})
	}
}
