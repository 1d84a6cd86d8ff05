package sign_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
)

func TestAnApproverMayApproveTheScopesItsEntryNames(t *testing.T) {
	k, _ := sign.Generate()
	entry := func(scopes ...string) sign.Approver {
		a := sign.ApproverFor("alice", k.Public())
		a.Scopes = scopes
		return a
	}
	for _, c := range []struct {
		name   string
		a      sign.Approver
		scope  string
		may    bool
		listed []string
	}{
		{"an entry without scopes may approve the default scope", entry(), "default", true, []string{"default"}},
		{"an entry without scopes may approve no other scope", entry(), "team-a", false, []string{"default"}},
		{"an entry naming a scope may approve it", entry("team-a", "team-b"), "team-b", true, []string{"team-a", "team-b"}},
		{"an entry naming scopes may approve no other", entry("team-a"), "team-c", false, []string{"team-a"}},
		{"an entry naming scopes but not default may not approve default", entry("team-a"), "default", false, []string{"team-a"}},
		{"an entry naming * may approve any scope", entry("*"), "team-z", true, []string{"*"}},
		{"an entry naming * may approve the default scope", entry("*"), "default", true, []string{"*"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.MayApprove(c.scope); got != c.may {
				t.Errorf("MayApprove(%q) = %v, want %v", c.scope, got, c.may)
			}
			if got := c.a.ScopeList(); !slices.Equal(got, c.listed) {
				t.Errorf("ScopeList() = %q, want %q", got, c.listed)
			}
		})
	}
}

func TestTheScopesOfAnEntryAreReadAndWrittenWithTheFile(t *testing.T) {
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	alice := sign.ApproverFor("alice", k1.Public())
	alice.Scopes = []string{"team-a", "team-b"}
	bob := sign.ApproverFor("bob", k2.Public())
	p := filepath.Join(t.TempDir(), "trusted.json")
	if err := sign.WriteTrusted(p, alice, bob); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if strings.Count(string(b), `"scopes"`) != 1 {
		t.Fatalf("the file names scopes other than alice's, or none:\n%s", b)
	}
	got, err := sign.ReadTrusted(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0].Scopes, alice.Scopes) || got[1].Scopes != nil {
		t.Fatalf("read back scopes %q and %q, want %q and none", got[0].Scopes, got[1].Scopes, alice.Scopes)
	}
	kr, _ := sign.NewKeyring(got...)
	if a, _ := kr.Lookup(k2.ID); !a.MayApprove("default") || a.MayApprove("team-a") {
		t.Fatalf("bob, listed without scopes, may approve %q", a.ScopeList())
	}
}

func TestTheScopesOfAnEntryAreReadStrictly(t *testing.T) {
	k, _ := sign.Generate()
	a := sign.ApproverFor("alice", k.Public())
	file := func(scopes string) string {
		return `{"approvers":[` + strings.TrimSuffix(approverJSON(a), "}") + `,"scopes":` + scopes + `}]}`
	}
	for _, c := range []struct{ name, file, want string }{
		{"scopes that are not an array", file(`"team-a"`), "$.approvers[0].scopes must be an array"},
		{"a scope that is not a string", file(`["team-a",7]`), "$.approvers[0].scopes[1] must be a string"},
		{"an empty list of scopes", file(`[]`), "$.approvers[0].scopes is empty"},
		{"a scope in upper case", file(`["Team-A"]`), `$.approvers[0].scopes[0] is "Team-A"`},
		{"a scope with a dot (two subject tokens)", file(`["team.a"]`), `$.approvers[0].scopes[0] is "team.a"`},
		{"a scope with a wildcard inside it", file(`["team-*"]`), `$.approvers[0].scopes[0] is "team-*"`},
		{"a scope named twice", file(`["team-a","team-a"]`), `$.approvers[0].scopes[1] names "team-a" again`},
		{"* beside other scopes", file(`["*","team-a"]`), `names "*" beside other scopes`},
		{"a case variant of the member", strings.Replace(file(`["team-a"]`), `"scopes"`, `"Scopes"`, 1), `did you mean "scopes"`},
	} {
		t.Run(c.name+" is refused, naming the file and the field", func(t *testing.T) {
			assertKeyFileRefused(t, c.file, c.want)
		})
	}
	t.Run("a keyring made in code refuses an unusable scope too", func(t *testing.T) {
		b := a
		b.Scopes = []string{"Team"}
		if _, err := sign.NewKeyring(b); !errors.Is(err, sign.ErrScope) || !strings.Contains(err.Error(), "approvers[0].scopes[0]") {
			t.Fatalf("err %v, want sign.ErrScope naming approvers[0].scopes[0]", err)
		}
	})
}

func TestReplaceSaysWhichApproversScopesChanged(t *testing.T) {
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	alice := sign.ApproverFor("alice", k1.Public())
	bob := sign.ApproverFor("bob", k2.Public())
	bob.Scopes = []string{"team-a", "team-b"}
	kr, _ := sign.NewKeyring(alice, bob)
	alice2, bob2 := alice, bob
	alice2.Scopes = []string{"*"}
	bob2.Scopes = []string{"team-b", "team-a"}
	next, _ := sign.NewKeyring(alice2, bob2)
	added, removed := kr.Replace(next)
	if len(added) != 1 || added[0].Name != "alice" || len(removed) != 1 || removed[0].Name != "alice" {
		t.Fatalf("added %v, removed %v; want alice (scopes changed) both, bob (same scopes, other order) neither", added, removed)
	}
	if a, _ := kr.Lookup(k1.ID); !a.MayApprove("team-z") {
		t.Fatalf("alice's new scopes are not in force: %q", a.ScopeList())
	}
}
