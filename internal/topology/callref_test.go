package topology_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestACallReferenceReadsBackAsItsMessageAndDelivery(t *testing.T) {
	ref := topology.CallRef(42, 3, "a1b2")
	if ref != "APPROVALS:42:3:a1b2" {
		t.Fatalf("CallRef = %q", ref)
	}
	if seq, d, ok := topology.ParseCallRef(ref); !ok || seq != 42 || d != 3 {
		t.Fatalf("ParseCallRef(%q) = %d, %d, %v; want 42, 3, true", ref, seq, d, ok)
	}
}

func TestAnythingButACallReferenceIsNotReadAsOne(t *testing.T) {
	for _, ref := range []string{
		"", "APPROVALS:42:3", "APPROVALS:42:3:", "RECEIPTS:42:3:x", "APPROVALS:x:3:a",
		"APPROVALS:42:-1:a", "APPROVALS:42:3:a:b", "someone else's call",
	} {
		if seq, d, ok := topology.ParseCallRef(ref); ok {
			t.Errorf("ParseCallRef(%q) = %d, %d, true; want refused", ref, seq, d)
		}
	}
}
