package scenario_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// The largest valid envelope passes the gate's checks that need no keys
// and fits document.MaxEnvelopeBytes, which stays close to it: the bound
// the APPROVALS stream takes is what valid envelopes need, not more.
func TestTheLargestValidEnvelopeFitsTheEnvelopeBoundWhichStaysCloseToIt(t *testing.T) {
	a, err := scenario.Largest()
	if err != nil {
		t.Fatal(err)
	}
	env := a.Envelope()
	if _, err := gate.CheckBindings(env); err != nil {
		t.Fatalf("the largest envelope is refused: %v", err)
	}
	t.Logf("the largest valid envelope is %d bytes; the bound is %d", len(env), document.MaxEnvelopeBytes)
	if len(env) > document.MaxEnvelopeBytes {
		t.Errorf("the largest valid envelope is %d bytes, over the bound of %d", len(env), document.MaxEnvelopeBytes)
	}
	if slack := document.MaxEnvelopeBytes - len(env); slack > 16<<10 {
		t.Errorf("the bound leaves %d bytes over the largest valid envelope: at most 16 KiB for white space and escapes", slack)
	}
}
