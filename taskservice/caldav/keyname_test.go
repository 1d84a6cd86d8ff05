package caldav

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// The gate bounds an intent id by document.KeyNameBytes so that no key it
// lets through is one this adapter cannot name, with a mark key's tag or
// without: the two agree on every tagged name's length, and on where
// names stop fitting.
func TestTheGatesKeyBoundIsTheResourceNamesOwn(t *testing.T) {
	if MaxResourceNameBytes != document.MaxKeyNameBytes || document.KeyTagBytes != len(tagSeparator)+proof.TagHexDigits {
		t.Fatalf("MaxResourceNameBytes is %d, document.MaxKeyNameBytes %d; the tag is %d bytes, document.KeyTagBytes %d",
			MaxResourceNameBytes, document.MaxKeyNameBytes, len(tagSeparator)+proof.TagHexDigits, document.KeyTagBytes)
	}
	tag := strings.Repeat("a", proof.TagHexDigits)
	ids := []string{"intent-0001", "team/a b?#%", "a~b", ".hidden", "..", "a.b", "通知", "x.", "A-Z_a-z.0-9"}
	for n := 190; n <= 245; n++ {
		ids = append(ids, strings.Repeat("i", n), "."+strings.Repeat("i", n-1), strings.Repeat("é", n/6))
	}
	for _, scope := range []string{"", document.DefaultScope, "team-a", strings.Repeat("s", document.MaxScopeBytes)} {
		for _, id := range ids {
			name, err := taggedResourceName(scope, id, tag)
			n := document.KeyNameBytes(scope, id)
			switch {
			case n <= document.MaxKeyNameBytes && err != nil:
				t.Errorf("scope %q, intent %.20q…: the gate lets a %d-byte name through that the adapter refuses: %v", scope, id, n, err)
			case n > document.MaxKeyNameBytes && err == nil:
				t.Errorf("scope %q, intent %.20q…: the gate refuses a %d-byte name the adapter takes (%d bytes)", scope, id, n, len(name))
			case err == nil && len(name) != n:
				t.Errorf("scope %q, intent %.20q…: the name %q is %d bytes, the gate counts %d", scope, id, name, len(name), n)
			}
			if _, err := ScopedResourceName(scope, id); n <= document.MaxKeyNameBytes && err != nil {
				t.Errorf("scope %q, intent %.20q…: the gate lets a key through whose name without a tag the adapter refuses: %v", scope, id, err)
			}
		}
	}
}
