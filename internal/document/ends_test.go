package document_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
)

func TestEndsOnlyATerminalReceiptEndsTheMessageItNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		named   uint64
		outcome string
		ends    bool
	}{
		{"created", 7, document.OutcomeCreated, true},
		{"replayed", 7, document.OutcomeReplayed, true},
		{"an idempotency conflict", 7, document.OutcomeConflict, true},
		{"rejected", 7, document.OutcomeRejected, true},
		{"dead-lettered", 7, document.OutcomeDeadLettered, true},
		{"an outcome nobody defines", 7, "pending", false},
		{"no outcome", 7, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok := document.Ends(tc.named, tc.outcome)
			if ok != tc.ends || (ok && seq != tc.named) {
				t.Fatalf("Ends(%d, %q) = %d, %v; want %d, %v", tc.named, tc.outcome, seq, ok, tc.named, tc.ends)
			}
			r := &document.Receipt{Outcome: tc.outcome, Delivery: document.Delivery{StreamSeq: tc.named}}
			if got := r.Of(tc.named); got != tc.ends {
				t.Errorf("a receipt %q naming message %d: Of(%d) = %v, want %v", tc.outcome, tc.named, tc.named, got, tc.ends)
			}
			if r.Of(tc.named + 1) {
				t.Errorf("a receipt %q naming message %d is the receipt of message %d", tc.outcome, tc.named, tc.named+1)
			}
		})
	}
}
