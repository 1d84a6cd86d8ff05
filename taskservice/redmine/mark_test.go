package redmine_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// Both versions of a mark read back exactly; a tagged mark starts with
// its version and holds the untagged mark's fields.
func TestMarksReadBackExactly(t *testing.T) {
	for _, intent := range []string{"a", "A b", "x|y", "50%", "é", "a+b", "a%2Bb", "st1 default a"} {
		t.Run("the mark of "+intent+" reads back as it", func(t *testing.T) {
			for _, m := range []string{redmine.Mark("team-a", intent, digestA), redmine.TaggedMark(markKey, "team-a", intent, digestA)} {
				scope, got, digest, ok := redmine.ParseMark(m)
				if !ok || scope != "team-a" || got != intent || digest != digestA {
					t.Fatalf("ParseMark(%q) = %q, %q, %q, %v", m, scope, got, digest, ok)
				}
			}
		})
	}
	for _, tc := range []struct{ name, v string }{
		{"an empty value", ""},
		{"another version", "st3 default a " + digestA},
		{"an untagged mark with a tag", "st1 default a " + digestA + " 00"},
		{"a tagged mark with an empty tag", "st2 default a " + digestA + " "},
		{"a bad scope", "st1 _x a " + digestA},
		{"a bad digest", "st1 default a sha256:00"},
		{"an extra field", "st1 default a b " + digestA},
		{"an intent id not escaped as the adapter escapes it", "st1 default a%20b " + digestA},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			if _, _, _, ok := redmine.ParseMark(tc.v); ok {
				t.Fatalf("ParseMark(%q) accepted it", tc.v)
			}
		})
	}
}
