package document_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
)

func TestIdentifyReadsTheIntentsScope(t *testing.T) {
	env := func(request string) []byte {
		return []byte(`{"schema_version":"task-envelope.v1","candidate":{},"request":` + request + `,"approval":{"approval_id":"approval-1"}}`)
	}
	for _, c := range []struct{ name, request, want string }{
		{"a request naming no scope is in default", `{"intent_id":"intent-1"}`, "default"},
		{"a request naming team-a is in team-a", `{"intent_id":"intent-1","scope":"team-a"}`, "team-a"},
		{"a scope that is not one is left empty", `{"intent_id":"intent-1","scope":"Team.A"}`, ""},
		{"a scope that is not a string is left empty", `{"intent_id":"intent-1","scope":7}`, ""},
		{"a request without an intent id has no key, so no scope", `{"scope":"team-a"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := document.Identify(env(c.request)).Scope; got != c.want {
				t.Fatalf("scope %q, want %q", got, c.want)
			}
		})
	}
}
