package sign_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
)

const digest = "sha256:3fd3958b68b92fcf34b6c14ccd0c2175e633377704dedac864ce29b72eb530a8"

func TestSignatures(t *testing.T) {
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := k.Sign(digest)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a signature verifies over its digest with its key", func(t *testing.T) {
		if err := sign.Verify(k.Public(), digest, sig); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a signature over another digest is refused", func(t *testing.T) {
		if err := sign.Verify(k.Public(), strings.Replace(digest, "3fd", "3fe", 1), sig); !errors.Is(err, sign.ErrBadSignature) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a signature by another key is refused", func(t *testing.T) {
		other, _ := sign.Generate()
		if err := sign.Verify(other.Public(), digest, sig); !errors.Is(err, sign.ErrBadSignature) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a plain Ed25519 signature without the context string is refused", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := sign.WriteKeyPair(dir, "k", k); err != nil {
			t.Fatal(err)
		}
		// The same key signing the same bytes without the approval context.
		priv := loadRaw(t, filepath.Join(dir, "k.key"))
		plain := sign.SignaturePrefix + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(digest)))
		if err := sign.Verify(k.Public(), digest, plain); !errors.Is(err, sign.ErrBadSignature) {
			t.Fatalf("a context-free signature verified: %v", err)
		}
	})
	t.Run("a malformed signature is refused", func(t *testing.T) {
		for _, s := range []string{"", "ed25519:", "ed25519:!!", strings.TrimPrefix(sig, sign.SignaturePrefix)} {
			if err := sign.Verify(k.Public(), digest, s); !errors.Is(err, sign.ErrBadSignature) {
				t.Errorf("%q: got %v", s, err)
			}
		}
	})
}

func loadRaw(t *testing.T, path string) ed25519.PrivateKey {
	t.Helper()
	k, err := sign.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	// Re-derive the raw key through a signature-independent route: the
	// package keeps it private, so read the PKCS#8 seed from the file.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	der := block.Bytes
	priv := ed25519.NewKeyFromSeed(der[len(der)-32:])
	if !priv.Public().(ed25519.PublicKey).Equal(k.Public()) {
		t.Fatal("the seed read from the file is not the key's")
	}
	return priv
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k, _ := sign.Generate()
	entry, err := sign.WriteKeyPair(dir, "reviewer", k)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the private key is written for its owner only and loads back", func(t *testing.T) {
		st, err := os.Stat(filepath.Join(dir, "reviewer.key"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", st.Mode().Perm())
		}
		back, err := sign.LoadKey(filepath.Join(dir, "reviewer.key"))
		if err != nil || back.ID != k.ID {
			t.Fatalf("loaded %v, %v", back, err)
		}
	})
	t.Run("an existing key is never overwritten", func(t *testing.T) {
		if _, err := sign.WriteKeyPair(dir, "reviewer", k); err == nil {
			t.Fatal("overwrote a key")
		}
	})
	t.Run("a key file others can read is refused", func(t *testing.T) {
		p := filepath.Join(dir, "reviewer.key")
		if err := os.Chmod(p, 0o640); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Chmod(p, 0o600) }()
		if _, err := sign.LoadKey(p); !errors.Is(err, sign.ErrKeyFile) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a trusted-approvers entry whose key id does not match its key is refused", func(t *testing.T) {
		bad := entry
		bad.KeyID = "ed25519-0000000000000000"
		if _, err := sign.NewKeyring(bad); !errors.Is(err, sign.ErrKeyFile) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the trusted-approvers file round-trips and names unknown keys as such", func(t *testing.T) {
		p := filepath.Join(dir, "trusted.json")
		if err := sign.WriteTrusted(p, entry); err != nil {
			t.Fatal(err)
		}
		kr, err := sign.LoadTrusted(p)
		if err != nil || kr.Len() != 1 {
			t.Fatalf("%v, %v", kr, err)
		}
		if _, err := kr.Lookup("ed25519-ffffffffffffffff"); !errors.Is(err, sign.ErrUnknownKey) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("printing a key shows its id only", func(t *testing.T) {
		if s := k.String(); s != "sign.Key("+k.ID+")" {
			t.Fatalf("%q", s)
		}
	})
}
