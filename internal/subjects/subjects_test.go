package subjects_test

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
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
			for _, s := range []string{subjects.Approval("team-a", tc.id), subjects.Receipt("team-a", tc.id), subjects.DeadLetter("team-a", tc.id)} {
				if strings.Count(s, ".") != 2 || !strings.HasSuffix(s, ".team-a."+got) {
					t.Errorf("subject %q, want three tokens ending in team-a.%q", s, got)
				}
			}
		})
	}
}

func TestAScopeBecomesOneSubjectTokenThatNoOtherScopeShares(t *testing.T) {
	for _, tc := range []struct {
		name, scope, want string
	}{
		{"a valid scope is its own token", "team-a", "team-a"},
		{"an empty scope is the default scope", "", document.DefaultScope},
		{"the unknown scope is its own token", subjects.ScopeUnknown, subjects.ScopeUnknown},
		{"a scope with a dot is hashed", "team-a.team-b", "_h-"},
		{"a wildcard scope is hashed", "*", "_h-"},
		{"a full wildcard scope is hashed", ">", "_h-"},
		{"a scope with white space is hashed", "team a", "_h-"},
		{"an upper-case scope is hashed", "Team-A", "_h-"},
		{"a scope that starts with '_' is hashed", "_team", "_h-"},
		{"a scope longer than 64 bytes is hashed", strings.Repeat("a", document.MaxScopeBytes+1), "_h-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := subjects.ScopeToken(tc.scope)
			if tc.want == "_h-" {
				if !strings.HasPrefix(got, "_h-") || len(got) != 3+32 || got == subjects.ScopeToken(tc.scope+"x") {
					t.Fatalf("scope token %q, want _h- and 32 hex digits of its own", got)
				}
				if document.ValidScope(got) {
					t.Fatalf("scope token %q of an invalid scope is a valid scope: it would share that scope's subjects", got)
				}
			} else if got != tc.want {
				t.Fatalf("scope token %q, want %q", got, tc.want)
			}
			for _, s := range []string{subjects.Approval(tc.scope, "intent-0001"), subjects.Receipt(tc.scope, "intent-0001"), subjects.DeadLetter(tc.scope, "intent-0001")} {
				tokens := strings.Split(s, ".")
				if len(tokens) != 3 || tokens[1] != got || tokens[2] != "intent-0001" {
					t.Errorf("subject %q, want three tokens: the stream's, %q, intent-0001", s, got)
				}
				for _, tok := range tokens {
					if tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
						t.Errorf("subject %q has a wildcard or white space", s)
					}
				}
			}
			if w := subjects.Receipts(tc.scope); w != "receipts."+got+".>" {
				t.Errorf("receipts of the scope %q, want receipts.%s.>", w, got)
			}
			if w := subjects.Approvals(tc.scope); w != "approvals."+got+".>" {
				t.Errorf("approvals of the scope %q, want approvals.%s.>", w, got)
			}
		})
	}
}

func TestTheScopeOfADeliveryIsReadFromItsSubject(t *testing.T) {
	for _, tc := range []struct {
		name, subject, want string
	}{
		{"an approval subject names its scope", subjects.Approval("team-a", "intent-0001"), "team-a"},
		{"an approval without a scope is in the default scope", subjects.Approval("", "intent-0001"), document.DefaultScope},
		{"a subject of two tokens names no scope", "approvals.intent-0001", subjects.ScopeUnknown},
		{"a subject of four tokens names no scope", "approvals.team-a.intent.0001", subjects.ScopeUnknown},
		{"a hashed scope token is not a scope", subjects.Approval("Team.A", "intent-0001"), subjects.ScopeUnknown},
		{"a receipts subject is not an approval", subjects.Receipt("team-a", "intent-0001"), subjects.ScopeUnknown},
		{"an empty scope token is not a scope", "approvals..intent-0001", subjects.ScopeUnknown},
		{"an empty intent token is not an approval", "approvals.team-a.", subjects.ScopeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := subjects.ScopeOfApproval(tc.subject); got != tc.want {
				t.Fatalf("scope of %q: %q, want %q", tc.subject, got, tc.want)
			}
		})
	}
}
