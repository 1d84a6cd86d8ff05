package sign

import (
	"errors"
	"fmt"
	"testing"
)

// signedApproval makes a key, a keyring that trusts it as reviewer-1 and an
// approval signed with it, whose signature has verified once.
func signedApproval(t *testing.T) (k *Key, kr *Keyring, approval map[string]any, sig string) {
	t.Helper()
	k, _ = Generate()
	kr, err := NewKeyring(ApproverFor("reviewer-1", k.Public()))
	if err != nil {
		t.Fatal(err)
	}
	approval = map[string]any{
		"schema_version": "task-approval.v1",
		"approval_id":    "approval-0001",
		"approved_by":    "reviewer-1",
		"key_id":         k.ID,
		"request":        map[string]any{"request_id": "task-request-0001", "digest": "sha256:00"},
		"capabilities":   []any{"create_fake_task"},
	}
	d, err := UnsignedDigest(approval)
	if err != nil {
		t.Fatal(err)
	}
	if sig, err = k.Sign(d); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.VerifyApproval(approval, k.ID, sig); err != nil {
		t.Fatal(err)
	}
	return k, kr, approval, sig
}

// A signature that verified once is remembered, and nothing that differs
// from it by one byte, in the approval or in the signature, passes for it.
func TestARememberedSignatureAcceptsOnlyTheSameApprovalAndSignature(t *testing.T) {
	k, kr, approval, sig := signedApproval(t)
	if _, err := kr.VerifyApproval(approval, k.ID, sig); err != nil {
		t.Fatal(err)
	}
	if n := kr.current().verified.len(); n != 1 {
		t.Fatalf("%d signatures remembered, want 1", n)
	}

	// Every character of the signature changed, one at a time.
	for i := len(SignaturePrefix); i < len(sig); i++ {
		for _, c := range []byte{'A', 'B', '-'} {
			if sig[i] == c {
				continue
			}
			bad := sig[:i] + string(c) + sig[i+1:]
			if _, err := kr.VerifyApproval(approval, k.ID, bad); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("signature changed at %d (%q) accepted: %v", i, bad, err)
			}
		}
	}
	// Every byte of every string in the approval changed, one at a time.
	var strs func(prefix string, m map[string]any, f func(set func(string), s string))
	strs = func(prefix string, m map[string]any, f func(set func(string), s string)) {
		for name, v := range m {
			switch x := v.(type) {
			case string:
				f(func(s string) { m[name] = s }, x)
			case map[string]any:
				strs(prefix+"."+name, x, f)
			case []any:
				for i, el := range x {
					if s, ok := el.(string); ok {
						f(func(s string) { x[i] = s }, s)
					}
				}
			}
		}
	}
	changed := 0
	strs("$", approval, func(set func(string), s string) {
		for i := range len(s) {
			set(s[:i] + string(s[i]^1) + s[i+1:])
			_, err := kr.VerifyApproval(approval, k.ID, sig)
			set(s)
			// A changed key_id names a key the keyring does not have.
			if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("approval with %q changed at byte %d accepted: %v", s, i, err)
			}
			changed++
		}
	})
	if changed < 100 {
		t.Fatalf("only %d changes tried", changed)
	}
	// A member added, or the signature's own bytes checked under another
	// key with the same approval.
	approval["extra"] = "x"
	if _, err := kr.VerifyApproval(approval, k.ID, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("approval with a member added accepted: %v", err)
	}
	delete(approval, "extra")
	if _, err := kr.VerifyApproval(approval, k.ID, sig); err != nil {
		t.Fatalf("the original no longer verifies: %v", err)
	}
	if n := kr.current().verified.len(); n != 1 {
		t.Fatalf("%d signatures remembered, want 1: a failed check must not be remembered", n)
	}
}

// The remembered signatures are bound to the public key: a key no longer
// trusted is refused, even for an approval it signed and that verified.
func TestARememberedSignatureIsRefusedOnceItsKeyIsNoLongerTrusted(t *testing.T) {
	k, kr, approval, sig := signedApproval(t)
	other, _ := Generate()
	next, err := NewKeyring(ApproverFor("reviewer-2", other.Public()))
	if err != nil {
		t.Fatal(err)
	}
	kr.Replace(next)
	if _, err := kr.VerifyApproval(approval, k.ID, sig); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("got %v, want ErrUnknownKey", err)
	}
	// The same digest and signature under another public key is another
	// entry of the set.
	d, _ := UnsignedDigest(approval)
	a := verifiedKey{digest: d, signature: sig}
	copy(a.pub[:], k.Public())
	b := a
	copy(b.pub[:], other.Public())
	s := newVerifiedSet()
	s.add(&a)
	if !s.has(&a) || s.has(&b) {
		t.Fatal("the set does not tell the two keys apart")
	}
}

func TestTheRememberedSignaturesAreBounded(t *testing.T) {
	s := newVerifiedSet()
	for i := range 5 * verifiedCap {
		s.add(&verifiedKey{digest: fmt.Sprint(i)})
	}
	if n := s.len(); n > 2*verifiedCap {
		t.Fatalf("%d remembered, more than %d", n, 2*verifiedCap)
	}
	last := &verifiedKey{digest: fmt.Sprint(5*verifiedCap - 1)}
	first := &verifiedKey{digest: "0"}
	if !s.has(last) || s.has(first) {
		t.Fatal("the set does not keep the most recent signatures")
	}
}
