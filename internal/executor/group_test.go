package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// A group of a few receipts, each for a key of its own, is stored by
// publishing each alone, without an atomic batch's fixed cost. Receipts of
// one key go in one atomic batch however few they are (a tenant's wait
// finds a receipt that a later one of its key hides only through their
// batch), and so does a group of more than AloneUpTo.
func TestAFewReceiptsAreStoredAloneUnlessTwoAreForOneKey(t *testing.T) {
	upTo := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	for _, tc := range []struct {
		name string
		// approvals are scenario numbers; a number given twice is the
		// same approval sent twice.
		approvals   []int
		wantBatched bool
	}{
		{"three receipts of three keys are stored alone", upTo(3), false},
		{"AloneUpTo receipts of as many keys are stored alone", upTo(executor.AloneUpTo), false},
		{"three receipts, two of one key, are one atomic batch", []int{1, 2, 1}, true},
		{"one receipt more than AloneUpTo makes an atomic batch", upTo(executor.AloneUpTo + 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cand := scenario.Candidate()
			for _, n := range tc.approvals {
				a, err := scenario.Generate(cand, "group", n)
				if err != nil {
					t.Fatal(err)
				}
				data := a.Envelope()
				if _, err := env.JS.Publish(ctx, subjects.Approval("", document.Identify(data).IntentID), data); err != nil {
					t.Fatal(err)
				}
			}
			msgs := fetchDeliveries(ctx, t, env.JS, len(tc.approvals))
			ex, _ := newExecutor(t, env, executor.Config{ID: "exec-1", Logger: testenv.Logger()})
			if err := ex.StoreGroup(msgs); err != nil {
				t.Fatal(err)
			}

			receipts, err := env.JS.Stream(ctx, topology.ReceiptsStream)
			if err != nil {
				t.Fatal(err)
			}
			batches := map[string]int{}
			for seq := uint64(1); seq <= uint64(len(tc.approvals)); seq++ {
				m, err := receipts.GetMsg(ctx, seq)
				if err != nil {
					t.Fatalf("receipt %d of %d: %v", seq, len(tc.approvals), err)
				}
				batches[m.Header.Get("Nats-Batch-Id")]++
			}
			_, alone := batches[""]
			switch {
			case tc.wantBatched && (alone || len(batches) != 1):
				t.Errorf("receipts per atomic batch (\"\": stored alone) %v; want all %d in one batch", batches, len(tc.approvals))
			case !tc.wantBatched && (!alone || len(batches) != 1):
				t.Errorf("receipts per atomic batch (\"\": stored alone) %v; want all %d stored alone", batches, len(tc.approvals))
			}
			cons, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
			if err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.NumAckPending != 0 || info.AckFloor.Stream != uint64(len(tc.approvals)) {
				t.Errorf("consumer: %d deliveries unacked, acked up to %d; want all %d acked",
					info.NumAckPending, info.AckFloor.Stream, len(tc.approvals))
			}
		})
	}
}

// fetchDeliveries takes n deliveries from the approvals consumer.
func fetchDeliveries(ctx context.Context, t *testing.T, js jetstream.JetStream, n int) []jetstream.Msg {
	t.Helper()
	cons, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for len(msgs) < n {
		batch, err := cons.Fetch(n-len(msgs), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if ctx.Err() != nil {
			t.Fatalf("took %d of %d deliveries", len(msgs), n)
		}
	}
	return msgs
}
