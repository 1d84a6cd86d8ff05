package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
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

func TestApproveSaysWhichScopeItApproved(t *testing.T) {
	dir := t.TempDir()
	scoped := writeFile(t, dir, "request.json", scenario.Edit(readFile(t, seedFile("request.json")), func(m map[string]any) { m["scope"] = "team-a" }))
	for _, c := range []struct{ name, request, want string }{
		{"the seed request, naming no scope, is approved in default", seedFile("request.json"), "in scope default"},
		{"a request naming team-a is approved in team-a", scoped, "in scope team-a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := publisher(t, nil, files{seedFile("candidate.json"), c.request, ""}.args("approve", "--by", "reviewer-1", "-o", filepath.Join(t.TempDir(), "a.json"))...)
			r.expect(t, 0)
			if !strings.Contains(r.stderr, "intent-0001) "+c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
		})
	}
}

func TestCheckRefusesAtScopeUntilTheApproverIsTrustedForIt(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	m, err := scenario.ApproveInScope(scenario.Candidate(), "team-a", "task-request-0001", "intent-0001", scenario.Title,
		approve.Options{Key: scenario.TestKey(), At: now.Add(-time.Minute), Lifetime: time.Hour, ID: "approval-0001"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := files{writeFile(t, dir, "candidate.json", m.Candidate), writeFile(t, dir, "request.json", m.Request), writeFile(t, dir, "approval.json", m.Approval)}
	trusted := filepath.Join(dir, "trusted.json")
	if err := sign.WriteTrusted(trusted, sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public())); err != nil {
		t.Fatal(err)
	}
	r := publisher(t, nil, f.args("check", "--trusted-approvers", trusted)...)
	r.expect(t, 1)
	if !strings.HasPrefix(r.stdout, "fail: scope at $.request.scope: ") || !strings.Contains(r.stdout, `"team-a"`) || !strings.Contains(r.stdout, `"default"`) {
		t.Errorf("stdout %q, want a fail at scope naming team-a and what the approver may approve", r.stdout)
	}
	publisher(t, nil, "trust", "--trusted", trusted, "--name", scenario.Reviewer, "--scope", "team-a").expect(t, 0)
	publisher(t, nil, f.args("check", "--trusted-approvers", trusted)...).expect(t, 0)
}

func TestAReceiptReadsWithItsScopeAndADeletedTask(t *testing.T) {
	replayed := readFile(t, "../../testdata/receipts/replayed.json")
	for _, c := range []struct {
		name      string
		edit      func(m map[string]any)
		want, not string
	}{
		{"a replay of a deleted task says so and that nothing was created again",
			func(m map[string]any) { m["task_deleted"] = true },
			"replayed: the same task fake-task-0001 for intent intent-0001 (the task was deleted since); nothing was created again", "in scope"},
		{"a replay in team-a names its scope",
			func(m map[string]any) { m["scope"] = "team-a" },
			"replayed: the same task fake-task-0001 for intent intent-0001 in scope team-a; nothing new was created", "deleted"},
		{"a replay in default reads as before",
			func(m map[string]any) {},
			"replayed: the same task fake-task-0001 for intent intent-0001; nothing new was created", "deleted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, err := send.ParseReceipt(scenario.Edit(replayed, c.edit))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			publish.PrintReceipt(&out, rc)
			if !strings.HasPrefix(out.String(), c.want+"\n") || strings.Contains(out.String(), c.not) {
				t.Errorf("printed %q, want %q and no %q", out.String(), c.want, c.not)
			}
		})
	}
}
