package send_test

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/send"
)

// TestMessageIDsCannotBePredictedFromEachOther makes many ids, as a tenant
// that wants to publish ahead under another sender's next id would, and
// finds that they share nothing but the fixed tag: no common prefix after
// it, no repeats, and each carries as many characters as 128 random bits
// take.
func TestMessageIDsCannotBePredictedFromEachOther(t *testing.T) {
	const tag, many = "send-", 2000
	seen := make(map[string]bool, many)
	sharedByAll := ""
	for i := range many {
		id := send.NewMsgID()
		rest, ok := strings.CutPrefix(id, tag)
		if !ok {
			t.Fatalf("id %q does not start with the tag %q", id, tag)
		}
		if len(rest) < 22 {
			t.Fatalf("id %q carries %d characters after its tag, fewer than 128 random bits take", id, len(rest))
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		if i == 0 {
			sharedByAll = rest
			continue
		}
		for !strings.HasPrefix(rest, sharedByAll) {
			sharedByAll = sharedByAll[:len(sharedByAll)-1]
		}
	}
	if sharedByAll != "" {
		t.Errorf("all %d ids share %q after the tag: the next id can be guessed from one seen", many, sharedByAll)
	}
	// Two ids made one after the other differ in more than their last
	// characters.
	a, b := send.NewMsgID(), send.NewMsgID()
	common := 0
	for common < len(a) && common < len(b) && a[common] == b[common] {
		common++
	}
	if common > len(tag)+4 {
		t.Errorf("consecutive ids %q and %q share their first %d characters", a, b, common)
	}
}

func BenchmarkNewMsgID(b *testing.B) {
	for b.Loop() {
		_ = send.NewMsgID()
	}
}
