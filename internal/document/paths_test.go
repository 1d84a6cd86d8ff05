package document

import "testing"

func TestPathsOfFarArrayItemsAreNotKept(t *testing.T) {
	for path, far := range map[string]bool{
		"$.candidate.evidence[0].quote":    false,
		"$.candidate.evidence[15]":         false,
		"$.candidate.evidence[16]":         true,
		"$.candidate.evidence[1234].quote": true,
		"$.approval.capabilities[3]":       false,
		"$":                                false,
	} {
		if got := farItem(path); got != far {
			t.Errorf("farItem(%q) = %t, want %t", path, got, far)
		}
	}
	kept := func() int {
		keeping.Lock()
		defer keeping.Unlock()
		return keeping.n
	}
	before := kept()
	for i := range 100 {
		_ = join(indexed("$.candidate.evidence", 1000+i), "quote")
	}
	if n := kept(); n != before {
		t.Fatalf("%d paths of far items kept", n-before)
	}
	if got := join(indexed("$.x", 1000), "y"); got != "$.x[1000].y" {
		t.Fatalf("got %q", got)
	}
}
