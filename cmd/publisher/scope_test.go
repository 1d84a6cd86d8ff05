package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
)

// scopesOf reads the scopes the trusted file grants each approver.
func scopesOf(t *testing.T, trusted string) map[string][]string {
	t.Helper()
	as, err := sign.ReadTrusted(trusted)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, a := range as {
		out[a.Name] = a.ScopeList()
	}
	return out
}

func TestKeygenAndTrustSetTheScopesAnApproverMayApprove(t *testing.T) {
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.json")
	publisher(t, nil, "keygen", "--name", "alice", "--dir", dir, "--trusted", trusted).expect(t, 0)
	r := publisher(t, nil, "keygen", "--name", "bob", "--dir", dir, "--trusted", trusted, "--scope", "team-a", "--scope", "team-b")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, `"scopes"`) {
		t.Errorf("the printed entry does not name bob's scopes:\n%s", r.stdout)
	}
	if got := scopesOf(t, trusted); !slices.Equal(got["alice"], []string{"default"}) || !slices.Equal(got["bob"], []string{"team-a", "team-b"}) {
		t.Fatalf("scopes %q; want alice default only, bob team-a and team-b", got)
	}

	t.Run("trust gives an approver every scope with *", func(t *testing.T) {
		r := publisher(t, nil, "trust", "--trusted", trusted, "--name", "alice", "--scope", "*")
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, "*") {
			t.Errorf("stdout %q", r.stdout)
		}
		if got := scopesOf(t, trusted); !slices.Equal(got["alice"], []string{"*"}) || !slices.Equal(got["bob"], []string{"team-a", "team-b"}) {
			t.Fatalf("scopes %q; want alice *, bob unchanged", got)
		}
	})
	t.Run("trust --default-scope-only takes the scopes back to default", func(t *testing.T) {
		publisher(t, nil, "trust", "--trusted", trusted, "--name", "bob", "--default-scope-only").expect(t, 0)
		if got := scopesOf(t, trusted); !slices.Equal(got["bob"], []string{"default"}) {
			t.Fatalf("bob's scopes %q, want default", got["bob"])
		}
	})

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"keygen with a scope in upper case", []string{"keygen", "--name", "carol", "--dir", dir, "--trusted", trusted, "--scope", "Team"}, 2, `--scope[0] is "Team"`},
		{"keygen with * beside a scope", []string{"keygen", "--name", "carol", "--dir", dir, "--trusted", trusted, "--scope", "*", "--scope", "team-a"}, 2, `beside other scopes`},
		{"trust for a name the file does not list", []string{"trust", "--trusted", trusted, "--name", "mallory", "--scope", "team-a"}, 1, `no approver "mallory"`},
		{"trust with a scope holding a dot", []string{"trust", "--trusted", trusted, "--name", "alice", "--scope", "team.a"}, 2, `--scope[0] is "team.a"`},
		{"trust without scopes", []string{"trust", "--trusted", trusted, "--name", "alice"}, 2, "--default-scope-only"},
		{"trust with scopes and --default-scope-only", []string{"trust", "--trusted", trusted, "--name", "alice", "--scope", "x", "--default-scope-only"}, 2, "exclude each other"},
	} {
		t.Run(c.name+" is refused and changes nothing", func(t *testing.T) {
			before := readFile(t, trusted)
			r := publisher(t, nil, c.args...)
			r.expect(t, c.code)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			if string(readFile(t, trusted)) != string(before) {
				t.Error("the trusted file changed")
			}
		})
	}
}
