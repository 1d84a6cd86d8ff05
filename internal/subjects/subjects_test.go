package subjects_test

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/subjects"
)

func TestAnIntentIDBecomesOneSubjectToken(t *testing.T) {
	for _, tc := range []struct {
		name, id, want string
	}{
		{"a plain id is its own token", "intent-0001", "intent-0001"},
		{"an empty id is the unknown token", "", subjects.Unknown},
		{"an id with a dot is hashed", "a.b", "h-"},
		{"an id with a wildcard is hashed", "intent-*", "h-"},
		{"an id longer than 128 bytes is hashed", strings.Repeat("x", 129), "h-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := subjects.Token(tc.id)
			if tc.want == "h-" {
				if !strings.HasPrefix(got, "h-") || len(got) != 2+32 || got == subjects.Token(tc.id+"x") {
					t.Fatalf("token %q, want h- and 32 hex digits of its own", got)
				}
			} else if got != tc.want {
				t.Fatalf("token %q, want %q", got, tc.want)
			}
			for _, s := range []string{subjects.Approval(tc.id), subjects.Receipt(tc.id), subjects.DeadLetter(tc.id)} {
				if strings.Count(s, ".") != 1 || !strings.HasSuffix(s, "."+got) {
					t.Errorf("subject %q, want two tokens ending in %q", s, got)
				}
			}
		})
	}
}
