package gate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
)

// signedSeed is the seed scenario signed by the test key, and a checker that
// trusts that key with its clock an hour after the approvals were made.
func signedSeed(t testing.TB) (*scenario.Seed, *gate.Checker) {
	t.Helper()
	k := scenario.TestKey()
	s, err := scenario.BuildSigned(k, scenario.ApprovedAt, scenario.SignedLifetime)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, k.Public()))
	if err != nil {
		t.Fatal(err)
	}
	return s, &gate.Checker{Keys: kr, Now: func() time.Time { return scenario.ApprovedAt.Add(time.Hour) }}
}

func editApproval(a scenario.Approved, f func(m map[string]any)) scenario.Approved {
	a.Approval = scenario.Edit(a.Approval, f)
	return a
}

func wantCheck(t *testing.T, v *gate.Verdict, err error, check string) {
	t.Helper()
	var ge *gate.Error
	if !errors.As(err, &ge) {
		t.Fatalf("want a refusal at %s, got verdict %+v, err %v", check, v, err)
	}
	if ge.Check != check {
		t.Fatalf("stopped at %s (%v), want %s", ge.Check, err, check)
	}
}

func TestSignedApprovals(t *testing.T) {
	s, c := signedSeed(t)
	o := s.Original

	t.Run("a signed approval from a trusted key passes and names its approver", func(t *testing.T) {
		v, err := c.Check(o.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		if v.SignedBy != scenario.Reviewer {
			t.Fatalf("signed by %q, want %q", v.SignedBy, scenario.Reviewer)
		}
	})

	t.Run("an approval signed by an unknown key stops at signature", func(t *testing.T) {
		other, err := sign.Generate()
		if err != nil {
			t.Fatal(err)
		}
		s2, err := scenario.BuildSigned(other, scenario.ApprovedAt, scenario.SignedLifetime)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Check(s2.Original.Envelope())
		wantCheck(t, v, err, gate.CheckSignature)
	})

	t.Run("a valid signature copied onto different content stops at signature", func(t *testing.T) {
		var orig map[string]any
		if err := json.Unmarshal(o.Approval, &orig); err != nil {
			t.Fatal(err)
		}
		moved := editApproval(s.Changed, func(m map[string]any) { m["signature"] = orig["signature"] })
		v, err := c.Check(moved.Envelope())
		wantCheck(t, v, err, gate.CheckSignature)
	})

	t.Run("an approval edited after signing stops at signature", func(t *testing.T) {
		for name, f := range map[string]func(m map[string]any){
			"approved_by changed":  func(m map[string]any) { m["approved_by"] = "someone-else" },
			"not_after extended":   func(m map[string]any) { m["not_after"] = "2026-12-31T00:00:00Z" },
			"capabilities widened": func(m map[string]any) { m["capabilities"] = []string{"create_fake_task", "publish"} },
			"the request digest replaced": func(m map[string]any) {
				m["request"].(map[string]any)["digest"] = "sha256:" + "0000000000000000000000000000000000000000000000000000000000000000"
			},
			"the signature bytes tampered": func(m map[string]any) { m["signature"] = "ed25519:" + "A" + m["signature"].(string)[9:] },
		} {
			t.Run(name, func(t *testing.T) {
				v, err := c.Check(editApproval(o, f).Envelope())
				wantCheck(t, v, err, gate.CheckSignature)
			})
		}
	})

	t.Run("an unsigned approval stops at signature unless unsigned ones are allowed", func(t *testing.T) {
		u, err := scenario.Build()
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Check(u.Original.Envelope())
		wantCheck(t, v, err, gate.CheckSignature)
		insecure := *c
		insecure.AllowUnsigned = true
		if _, err := insecure.Check(u.Original.Envelope()); err != nil {
			t.Fatalf("insecure checker refused an unsigned approval: %v", err)
		}
		if _, err := insecure.Check(editApproval(o, func(m map[string]any) { m["approved_by"] = "x" }).Envelope()); err == nil {
			t.Fatal("allowing unsigned approvals let a broken signature through")
		}
	})

	t.Run("a signed approval that names only some signature members stops at approval_format", func(t *testing.T) {
		v, err := c.Check(editApproval(o, func(m map[string]any) { delete(m, "not_after") }).Envelope())
		wantCheck(t, v, err, gate.CheckApprovalFormat)
	})
}

func TestApprovalExpiry(t *testing.T) {
	s, c := signedSeed(t)
	var a document.Approval
	if err := json.Unmarshal(s.Original.Approval, &a); err != nil {
		t.Fatal(err)
	}
	notAfter, err := time.Parse(time.RFC3339, a.NotAfter)
	if err != nil {
		t.Fatal(err)
	}
	at := func(tm time.Time) *gate.Checker {
		cc := *c
		cc.Now = func() time.Time { return tm }
		return &cc
	}
	t.Run("an approval at its not_after still passes", func(t *testing.T) {
		if _, err := at(notAfter).Check(s.Original.Envelope()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an approval one second past its not_after stops at expiry", func(t *testing.T) {
		v, err := at(notAfter.Add(time.Second)).Check(s.Original.Envelope())
		wantCheck(t, v, err, gate.CheckExpiry)
	})
	t.Run("an approval made in the future stops at expiry", func(t *testing.T) {
		v, err := at(scenario.ApprovedAt.Add(-time.Hour)).Check(s.Original.Envelope())
		wantCheck(t, v, err, gate.CheckExpiry)
	})
	t.Run("an approval valid for longer than the executor accepts stops at expiry", func(t *testing.T) {
		long, err := scenario.BuildSigned(scenario.TestKey(), scenario.ApprovedAt, gate.DefaultMaxLifetime+time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Check(long.Original.Envelope())
		wantCheck(t, v, err, gate.CheckExpiry)
	})
}

func TestSignedTamperedMessagesStopAtTheirCheck(t *testing.T) {
	s, c := signedSeed(t)
	for _, tc := range s.TamperedCases() {
		t.Run(tc.Name+" stops at "+tc.Check, func(t *testing.T) {
			v, err := c.Check(tc.Envelope)
			wantCheck(t, v, err, tc.Check)
		})
	}
}

func TestASignedApprovalNamesItsSigner(t *testing.T) {
	_, c := signedSeed(t)
	other, err := scenario.ApproveWith(scenario.Candidate(), "task-request-0001", "intent-0001", scenario.Title,
		approve.Options{By: "someone-else", Key: scenario.TestKey(), At: scenario.ApprovedAt, Lifetime: time.Hour, ID: "approval-x"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Check(other.Envelope())
	wantCheck(t, v, err, gate.CheckSignature)
}

func TestExpiryIsJudgedAtTheGivenTime(t *testing.T) {
	s, c := signedSeed(t)
	late := *c
	late.Now = func() time.Time { return scenario.ApprovedAt.Add(30 * 24 * time.Hour) }
	if _, err := late.Check(s.Original.Envelope()); err == nil {
		t.Fatal("an approval weeks past its not_after passed")
	}
	if _, err := late.CheckAt(s.Original.Envelope(), scenario.ApprovedAt.Add(time.Hour)); err != nil {
		t.Fatalf("a message stored while its approval was valid was refused: %v", err)
	}
}

// A resent approval passes again, and once it has passed, an envelope that
// differs from it in any one byte of its approval is refused: the signatures
// the keyring remembers stand only for exactly what they verified.
func TestAResentApprovalPassesAndAnyChangedByteIsStillRefused(t *testing.T) {
	s, c := signedSeed(t)
	env := s.Original.Envelope()
	for range 3 {
		if _, err := c.Check(env); err != nil {
			t.Fatal(err)
		}
	}
	start := bytes.Index(env, []byte(`,"approval":`)) + len(`,"approval":`)
	if !json.Valid(env[start : len(env)-1]) {
		t.Fatal("the approval is not where the test expects it")
	}
	tried := 0
	for i := start; i < len(env)-1; i++ {
		for _, b := range []byte{'0', 'a', 'Z', '-'} {
			if env[i] == b {
				continue
			}
			changed := append([]byte(nil), env...)
			changed[i] = b
			if _, err := c.Check(changed); err == nil {
				t.Fatalf("byte %d of the envelope changed from %q to %q passed:\n%s", i, env[i], b, changed)
			}
			tried++
		}
	}
	if _, err := c.Check(env); err != nil {
		t.Fatalf("the original no longer passes: %v", err)
	}
	t.Logf("%d changed envelopes refused", tried)
}

// FuzzSignedGate checks that whatever the signature check passes verifies
// on its own with the standard library, over the approval's digest computed
// afresh: remembered signatures never let through what a plain check
// refuses.
func FuzzSignedGate(f *testing.F) {
	s, c := signedSeed(f)
	for _, a := range []scenario.Approved{s.Original, s.Changed, s.NewIntent} {
		f.Add(a.Envelope())
	}
	pub := scenario.TestKey().Public()
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := c.Check(data)
		if err != nil {
			return
		}
		parts, err := document.SplitEnvelope(data)
		if err != nil {
			t.Fatalf("gate passed what the strict decoder refuses: %v", err)
		}
		m := map[string]any{}
		for k, x := range parts.Approval.(map[string]any) {
			if k != "signature" {
				m[k] = x
			}
		}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := canon.Digest(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := sign.Verify(pub, d, v.Approval.Signature); err != nil {
			t.Fatalf("gate passed an approval whose signature does not verify: %v\n%s", err, data)
		}
	})
}

// A nil *Checker selects nothing: each of its methods refuses with
// ErrNoChecker instead of falling back to the checks that need no keys,
// which run only when called by name.
func TestANilCheckerRunsNoCheckAndSaysSo(t *testing.T) {
	s := seed(t)
	env := s.Original.Envelope()
	a := s.Original
	var c *gate.Checker
	for _, tc := range []struct {
		name string
		run  func() (*gate.Verdict, error)
	}{
		{"Check", func() (*gate.Verdict, error) { return c.Check(env) }},
		{"CheckAt", func() (*gate.Verdict, error) { return c.CheckAt(env, time.Now()) }},
		{"CheckDelivery", func() (*gate.Verdict, error) { return c.CheckDelivery("", env, time.Now()) }},
		{"CheckDocuments", func() (*gate.Verdict, error) { return c.CheckDocuments(a.Candidate, a.Request, a.Approval) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.run()
			if v != nil || !errors.Is(err, gate.ErrNoChecker) {
				t.Fatalf("got %v, %v; want no verdict and ErrNoChecker", v, err)
			}
		})
	}
	if _, err := gate.CheckBindings(env); err != nil {
		t.Fatalf("the same envelope, by CheckBindings: %v", err)
	}
	if _, err := gate.CheckDocumentBindings(a.Candidate, a.Request, a.Approval); err != nil {
		t.Fatalf("the same documents, by CheckDocumentBindings: %v", err)
	}
}
