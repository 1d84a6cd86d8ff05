package metrics_test

import (
	"slices"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/metrics"
	"github.com/sendtwice/sendtwice/internal/gate"
)

func TestTheRejectionLabelsAreTheGatesChecksInItsOrder(t *testing.T) {
	if !slices.Equal(metrics.GateChecks, gate.Checks) {
		t.Fatalf("metrics.GateChecks %q, gate.Checks %q", metrics.GateChecks, gate.Checks)
	}
}
