package document_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

func TestIdentifyReadsTheScopeOnlyWhenItIsAScope(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	with := func(scope any) []byte {
		req := scenario.Edit(s.Original.Request, func(m map[string]any) { m["scope"] = scope })
		env, err := document.BuildEnvelope(s.Original.Candidate, req, s.Original.Approval)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, tc := range []struct {
		name     string
		envelope []byte
		want     string
	}{
		{"a request without a scope names none (the default scope)", s.Original.Envelope(), ""},
		{"a request with a scope names it", with("team-a"), "team-a"},
		{"a scope with a dot is not a scope", with("team-a.team-b"), ""},
		{"a wildcard is not a scope", with("*"), ""},
		{"a scope that is not a string is not a scope", with(7), ""},
		{"a message that is not an envelope names none", []byte(`{"scope":"team-a"}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := document.Identify(tc.envelope)
			if id.Scope != tc.want {
				t.Fatalf("scope %q, want %q", id.Scope, tc.want)
			}
		})
	}
}
