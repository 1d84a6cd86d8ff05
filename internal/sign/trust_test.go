package sign_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
)

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// lastCharVariants returns enc with its last character replaced by every
// character that differs from it only in the padding bits (bits unused by a
// value of that many bytes).
func lastCharVariants(enc string, padBits uint) []string {
	last := strings.IndexByte(b64url, enc[len(enc)-1])
	var out []string
	for v := 0; v < 1<<padBits; v++ {
		c := last&^(1<<padBits-1) | v
		if c != last {
			out = append(out, enc[:len(enc)-1]+string(b64url[c]))
		}
	}
	return out
}

func TestASignatureVerifiesInItsCanonicalEncodingOnly(t *testing.T) {
	k, _ := sign.Generate()
	sig, err := k.Sign(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.Verify(k.Public(), digest, sig); err != nil {
		t.Fatal(err)
	}
	// 64 bytes take 86 characters, whose last 4 bits are padding: 15 other
	// strings decode to the same signature with a lenient decoder.
	variants := lastCharVariants(sig, 4)
	if len(variants) != 15 {
		t.Fatalf("%d variants", len(variants))
	}
	variants = append(variants, sig[:20]+"\n"+sig[20:], sig[:20]+"\r\n"+sig[20:], sig+"\n", sig+"==")
	kr, err := sign.NewKeyring(sign.ApproverFor("reviewer-1", k.Public()))
	if err != nil {
		t.Fatal(err)
	}
	approval := map[string]any{"approved_by": "reviewer-1"}
	d, _ := sign.UnsignedDigest(approval)
	good, _ := k.Sign(d)
	if _, err := kr.VerifyApproval(approval, k.ID, good); err != nil {
		t.Fatal(err)
	}
	for i, v := range variants {
		if err := sign.Verify(k.Public(), digest, v); !errors.Is(err, sign.ErrBadSignature) {
			t.Errorf("variant %d %q of the signature verified: %v", i, v, err)
		}
	}
	for i, v := range append(lastCharVariants(good, 4), good+"\n") {
		if _, err := kr.VerifyApproval(approval, k.ID, v); !errors.Is(err, sign.ErrBadSignature) {
			t.Errorf("variant %d %q of an approval's signature verified at the keyring: %v", i, v, err)
		}
	}
}

func TestAPublicKeyIsTrustedInItsCanonicalEncodingOnly(t *testing.T) {
	k, _ := sign.Generate()
	a := sign.ApproverFor("reviewer-1", k.Public())
	// 32 bytes take 43 characters, whose last 2 bits are padding.
	for _, v := range append(lastCharVariants(a.PublicKey, 2), a.PublicKey+"\n", a.PublicKey+"=") {
		b := a
		b.PublicKey = v
		if _, err := sign.NewKeyring(b); !errors.Is(err, sign.ErrKeyFile) {
			t.Errorf("public key %q was trusted: %v", v, err)
		}
	}
}

func approverJSON(a sign.Approver) string {
	return fmt.Sprintf(`{"name":%q,"key_id":%q,"public_key":%q}`, a.Name, a.KeyID, a.PublicKey)
}

func TestTheTrustedApproversFileIsReadStrictly(t *testing.T) {
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	alice := sign.ApproverFor("alice", k1.Public())
	bob := sign.ApproverFor("bob", k2.Public())
	aliceAsBob := sign.ApproverFor("bob", k1.Public())
	bobAsAlice := sign.ApproverFor("Alice", k2.Public())
	good := `{"approvers":[` + approverJSON(alice) + `,` + approverJSON(bob) + `]}`
	dir := t.TempDir()
	p := filepath.Join(dir, "trusted.json")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	kr, err := sign.LoadTrusted(p)
	if err != nil || kr.Len() != 2 {
		t.Fatalf("a good file: %v, %v", kr, err)
	}
	for _, c := range []struct{ name, file, want string }{
		{"a key id listed twice under two names", `{"approvers":[` + approverJSON(alice) + `,` + approverJSON(aliceAsBob) + `]}`, "already listed"},
		{"a name given to two keys", `{"approvers":[` + approverJSON(aliceAsBob) + `,` + approverJSON(bob) + `]}`, "already given"},
		{"a name given to two keys in two cases", `{"approvers":[` + approverJSON(alice) + `,` + approverJSON(bobAsAlice) + `]}`, "already given"},
		{"a duplicate member", `{"approvers":[` + approverJSON(alice) + `],"approvers":[` + approverJSON(bob) + `]}`, "duplicate"},
		{"a duplicate member in an entry", strings.Replace(good, `"name":"alice"`, `"name":"alice","name":"mallory"`, 1), "duplicate"},
		{"a case variant of a member", strings.Replace(good, `"name":"bob"`, `"Name":"bob"`, 1), `did you mean "name"`},
		{"a case variant of the top member", strings.Replace(good, `"approvers"`, `"Approvers"`, 1), `did you mean "approvers"`},
		{"an unknown member", strings.Replace(good, `]}`, `],"comment":"x"}`, 1), `"comment"`},
		{"trailing data", good + `{"approvers":[]}`, "after the JSON value"},
		{"no approvers", `{"approvers":[]}`, "no approvers"},
		{"a name that is not a string", strings.Replace(good, `"name":"bob"`, `"name":7`, 1), "must be a string"},
		{"a missing member", strings.Replace(good, `"name":"bob",`, ``, 1), `"name" is missing`},
		{"a control character in a name", strings.Replace(good, `"name":"bob"`, `"name":"bo\nb"`, 1), "control character"},
	} {
		t.Run(c.name+" is refused, naming the file", func(t *testing.T) {
			assertKeyFileRefused(t, c.file, c.want)
		})
	}
}

// assertKeyFileRefused writes file as a trusted-approvers file and wants
// LoadTrusted to refuse it with ErrKeyFile, in an error that names the file
// and says want.
func assertKeyFileRefused(t *testing.T, file, want string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trusted.json")
	if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	kr, err := sign.LoadTrusted(p)
	if !errors.Is(err, sign.ErrKeyFile) {
		t.Fatalf("loaded %d approvers, err %v; want it refused", kr.Len(), err)
	}
	if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name the file and say %q", err, want)
	}
}

func TestKeyFilesRecordTheReviewersName(t *testing.T) {
	dir := t.TempDir()
	k, _ := sign.Generate()
	if _, err := sign.WriteKeyPair(dir, "reviewer-1", k); err != nil {
		t.Fatal(err)
	}
	back, err := sign.LoadKey(filepath.Join(dir, "reviewer-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	if back.Name != "reviewer-1" || back.ID != k.ID {
		t.Fatalf("loaded %q %s, want reviewer-1 %s", back.Name, back.ID, k.ID)
	}
	pub, _ := os.ReadFile(filepath.Join(dir, "reviewer-1.pub"))
	if !strings.HasPrefix(string(pub), "sendtwice-approver: reviewer-1\n-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("the public key file does not name the reviewer:\n%s", pub)
	}
	if err := back.CheckSigner("reviewer-1"); err != nil {
		t.Errorf("its own name refused: %v", err)
	}
	err = back.CheckSigner("reviewer-2")
	if !errors.Is(err, sign.ErrWrongSigner) || !strings.Contains(err.Error(), `"reviewer-1"`) || !strings.Contains(err.Error(), `"reviewer-2"`) {
		t.Errorf("another name: %v, want ErrWrongSigner naming both", err)
	}
	t.Run("a key file with text other than the name before the key is refused", func(t *testing.T) {
		b, _ := os.ReadFile(filepath.Join(dir, "reviewer-1.key"))
		p := filepath.Join(t.TempDir(), "x.key")
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), "sendtwice-approver: ", "sendtwice-approver ", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sign.LoadKey(p); !errors.Is(err, sign.ErrKeyFile) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestAKeyCannotBeWrittenUnderANameThatIsNotASimpleToken(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "keys")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k, _ := sign.Generate()
	for _, name := range []string{"../x", "a/b", "..", ".hidden", "-flag", "", "with space", strings.Repeat("a", 65), "é"} {
		if _, err := sign.WriteKeyPair(dir, name, k); !errors.Is(err, sign.ErrName) {
			t.Errorf("name %q: %v, want ErrName", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "x.key")); err == nil {
		t.Fatal("a key was written outside the directory")
	}
}

func TestAddTrustedKeepsTheApproversAlreadyListed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "trusted.json")
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	k3, _ := sign.Generate()
	if err := sign.AddTrusted(p, sign.ApproverFor("alice", k1.Public())); err != nil {
		t.Fatal(err)
	}
	if err := sign.AddTrusted(p, sign.ApproverFor("bob", k2.Public())); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(p)
	if err := sign.AddTrusted(p, sign.ApproverFor("alice", k3.Public())); !errors.Is(err, sign.ErrName) {
		t.Fatalf("a second alice: %v, want ErrName", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Fatalf("a refused addition changed the file:\n%s", after)
	}
	kr, err := sign.LoadTrusted(p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range kr.Approvers() {
		names = append(names, a.Name)
	}
	if fmt.Sprint(names) != "[alice bob]" {
		t.Fatalf("the file names %v, want [alice bob]", names)
	}
}

func TestReplaceSwapsTheTrustedApproversAndSaysWhichChanged(t *testing.T) {
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	k3, _ := sign.Generate()
	kr, _ := sign.NewKeyring(sign.ApproverFor("alice", k1.Public()), sign.ApproverFor("bob", k2.Public()))
	next, _ := sign.NewKeyring(sign.ApproverFor("alice", k1.Public()), sign.ApproverFor("carol", k3.Public()))
	added, removed := kr.Replace(next)
	if len(added) != 1 || added[0].Name != "carol" || len(removed) != 1 || removed[0].Name != "bob" {
		t.Fatalf("added %v, removed %v; want carol added, bob removed", added, removed)
	}
	if _, err := kr.Lookup(k2.ID); !errors.Is(err, sign.ErrUnknownKey) {
		t.Fatalf("bob's key is still trusted: %v", err)
	}
	if a, err := kr.Lookup(k3.ID); err != nil || a.Name != "carol" {
		t.Fatalf("carol's key: %v, %v", a, err)
	}
}

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
