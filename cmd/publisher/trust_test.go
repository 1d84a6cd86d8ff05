package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// signedFiles writes a seed message signed by the test reviewer, approved at
// approvedAt for lifetime, and a trusted-approvers file naming the reviewer.
func signedFiles(t *testing.T, approvedAt time.Time, lifetime time.Duration) (files, string) {
	t.Helper()
	s, err := scenario.BuildSigned(scenario.TestKey(), approvedAt, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := files{
		candidate: writeFile(t, dir, "candidate.json", s.Original.Candidate),
		request:   writeFile(t, dir, "request.json", s.Original.Request),
		approval:  writeFile(t, dir, "approval.json", s.Original.Approval),
	}
	trusted := filepath.Join(dir, "trusted-approvers.json")
	if err := sign.WriteTrusted(trusted, sign.ApproverFor(scenario.Reviewer, scenario.TestKey().Public())); err != nil {
		t.Fatal(err)
	}
	return f, trusted
}

// corruptSignature rewrites the approval file with one signature character
// changed.
func corruptSignature(t *testing.T, f files) files {
	t.Helper()
	b := string(readFile(t, f.approval))
	i := strings.Index(b, `"ed25519:`) + len(`"ed25519:`) + 10
	c := byte('A')
	if b[i] == 'A' {
		c = 'B'
	}
	f.approval = writeFile(t, t.TempDir(), "approval.json", []byte(b[:i]+string(c)+b[i+1:]))
	return f
}

func TestCheckRunsSignatureAndExpiryOnlyWithTrustedApproversAndSaysSo(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	valid, trusted := signedFiles(t, now.Add(-time.Minute), time.Hour)
	corrupted := corruptSignature(t, valid)
	expired, _ := signedFiles(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 24*time.Hour)

	t.Run("a valid signed approval passes, signed by its reviewer", func(t *testing.T) {
		t.Parallel()
		r := publisher(t, nil, valid.args("check", "--trusted-approvers", trusted)...)
		r.expect(t, 0)
		if !strings.HasPrefix(r.stdout, "pass (signed by trusted approver reviewer-1)\n") {
			t.Errorf("stdout %q", r.stdout)
		}
		j := publisher(t, nil, valid.args("check", "--json", "--trusted-approvers", trusted)...)
		j.expect(t, 0)
		if got := checkJSON(t, j.stdout); got["result"] != "pass" || got["signed_by"] != "reviewer-1" || got["not_checked"] != "" {
			t.Errorf("check --json printed %v", got)
		}
	})
	for _, c := range []struct {
		name string
		f    files
	}{
		{"a corrupted signature fails at signature", corrupted},
		{"an unsigned approval fails at signature, as at an executor", seedOriginal},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := publisher(t, nil, c.f.args("check", "--trusted-approvers", trusted)...)
			r.expect(t, 1)
			if !strings.HasPrefix(r.stdout, "fail: signature at $.approval.signature: ") {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
	t.Run("an approval that expired in 2020 fails at expiry", func(t *testing.T) {
		t.Parallel()
		r := publisher(t, nil, expired.args("check", "--json", "--trusted-approvers", trusted)...)
		r.expect(t, 1)
		if got := checkJSON(t, r.stdout); got["result"] != "fail" || got["check"] != "expiry" || got["path"] != "$.approval.not_after" {
			t.Errorf("check --json printed %v, want a fail at expiry", got)
		}
	})
	t.Run("the trusted approvers can come from the environment", func(t *testing.T) {
		t.Setenv(publish.TrustedEnv, trusted)
		r := publisher(t, nil, corrupted.args("check")...)
		r.expect(t, 1)
		if !strings.HasPrefix(r.stdout, "fail: signature at ") {
			t.Errorf("stdout %q", r.stdout)
		}
	})
	t.Run("without trusted approvers the pass says what it did not check", func(t *testing.T) {
		t.Parallel()
		for _, f := range []files{corrupted, expired} {
			r := publisher(t, nil, f.args("check")...)
			r.expect(t, 0)
			if !strings.HasPrefix(r.stdout, "pass (signature, expiry and scope not checked: no --trusted-approvers)\n") {
				t.Errorf("stdout %q", r.stdout)
			}
			j := publisher(t, nil, f.args("check", "--json")...)
			j.expect(t, 0)
			if got := checkJSON(t, j.stdout); got["not_checked"] != "signature, expiry and scope not checked: no --trusted-approvers" {
				t.Errorf("check --json printed %v", got)
			}
		}
	})
}

func TestSendsLocalGateRefusesACorruptedSignatureWithTrustedApprovers(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	valid, trusted := signedFiles(t, now.Add(-time.Minute), time.Hour)
	corrupted := corruptSignature(t, valid)
	// No server is needed: nothing is published.
	r := publisher(t, nil, corrupted.args("send", "--server", "nats://127.0.0.1:1", "--trusted-approvers", trusted)...)
	r.expect(t, 1)
	for _, s := range []string{"nothing published", "signature", "$.approval.signature"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	expired, _ := signedFiles(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 24*time.Hour)
	t.Setenv(publish.TrustedEnv, trusted)
	r = publisher(t, nil, expired.args("send", "--server", "nats://127.0.0.1:1")...)
	r.expect(t, 1)
	if !strings.Contains(r.stderr, "nothing published") || !strings.Contains(r.stderr, "expiry") {
		t.Errorf("stderr lacks the expiry refusal:\n%s", r.stderr)
	}
}

func TestApproveWithAKeyRefusesAnotherNameThanTheKeys(t *testing.T) {
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.json")
	publisher(t, nil, "keygen", "--name", "reviewer-1", "--dir", dir, "--trusted", trusted).expect(t, 0)
	key := filepath.Join(dir, "reviewer-1.key")
	seed := files{seedFile("candidate.json"), seedFile("request.json"), ""}

	r := publisher(t, nil, seed.args("approve", "--key", key, "--by", "mallory")...)
	r.expect(t, 2)
	for _, s := range []string{`"mallory"`, `"reviewer-1"`, "signature"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if r.stdout != "" {
		t.Errorf("an approval was written: %s", r.stdout)
	}

	out := filepath.Join(dir, "approval.json")
	publisher(t, nil, seed.args("approve", "--key", key, "-o", out)...).expect(t, 0)
	if a := decodeApproval(t, readFile(t, out)); a.ApprovedBy != "reviewer-1" {
		t.Errorf("approved_by %q, want the key's name", a.ApprovedBy)
	}
	publisher(t, nil, seed.args("approve", "--key", key, "--by", "reviewer-1", "-o", filepath.Join(dir, "a2.json"))...).expect(t, 0)
	seed.approval = out
	publisher(t, nil, seed.args("check", "--trusted-approvers", trusted)...).expect(t, 0)
}

func TestKeygenAddsToTheTrustedApproversFile(t *testing.T) {
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.json")
	publisher(t, nil, "keygen", "--name", "alice", "--dir", dir, "--trusted", trusted).expect(t, 0)
	publisher(t, nil, "keygen", "--name", "bob", "--dir", dir, "--trusted", trusted).expect(t, 0)
	kr, err := sign.LoadTrusted(trusted)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range kr.Approvers() {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "alice,bob" {
		t.Fatalf("the trusted file names %v, want alice and bob", names)
	}
	before := readFile(t, trusted)
	other := t.TempDir()
	r := publisher(t, nil, "keygen", "--name", "alice", "--dir", other, "--trusted", trusted)
	r.expect(t, 1)
	if !strings.Contains(r.stderr, `"alice"`) {
		t.Errorf("stderr does not name the duplicate:\n%s", r.stderr)
	}
	if string(readFile(t, trusted)) != string(before) {
		t.Error("a refused keygen changed the trusted file")
	}
	if _, err := os.Stat(filepath.Join(other, "alice.key")); err == nil {
		t.Error("a refused keygen wrote a key")
	}
}

func TestKeygenRefusesANameThatWouldWriteOutsideDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "keys")
	for _, name := range []string{"../x", "a/../../x", "..", "/tmp/x"} {
		r := publisher(t, nil, "keygen", "--name", name, "--dir", dir)
		r.expect(t, 2)
	}
	if _, err := os.Stat(filepath.Join(root, "x.key")); err == nil {
		t.Fatal("a key was written outside --dir")
	}
}
