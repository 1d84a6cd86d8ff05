package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// "café" spelled with U+00E9 (NFC) and with e + U+0301 (NFD) would be two
// intent ids, so two tasks. The NFD request, approved as written, is
// refused at envelope naming request.intent_id; the NFC one passes.
func TestAnIntentIDNotInNFCIsRefusedAtTheEnvelopeCheck(t *testing.T) {
	for _, c := range []struct {
		name, intent string
		refused      bool
	}{
		{"an intent id in NFC passes", "caf\u00e9", false},
		{"the NFD spelling of the same intent id is refused", "cafe\u0301", true},
		{"combining marks out of canonical order are refused", "a\u0301\u0323", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := scenario.ApproveAsWritten(scenario.Candidate(), "task-request-cafe", c.intent, "補上通知設定的檢查項目", "approval-cafe")
			if err != nil {
				t.Fatal(err)
			}
			_, err = gate.CheckBindings(a.Envelope())
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *gate.Error
			if !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || ge.Path != "$.request.intent_id" ||
				!strings.Contains(ge.Reason, "NFC") {
				t.Fatalf("refusal %v, want envelope at $.request.intent_id saying NFC", err)
			}
			if !errors.Is(err, gate.ErrEnvelope) || !errors.Is(err, document.ErrValue) {
				t.Errorf("the refusal unwraps to neither ErrEnvelope nor ErrValue: %v", err)
			}
		})
	}
}
