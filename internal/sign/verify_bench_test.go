package sign_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/sendtwice/sendtwice/internal/sign"
)

// BenchmarkEd25519Verify is one Ed25519ctx check of an approval's signature
// alone (over its "sha256:…" digest, with the approvals' context), as the
// gate makes it alone (curve25519-voi with the approver's expanded public
// key and RFC 8032's cofactored equation), in a batch of 64 as the gate's
// verifier makes it under load (ns/op is per batch, µs/signature per
// signature), and as crypto/ed25519 makes it: the floor under the gate's
// BenchmarkGate/signed=true, which adds parsing, digests and the other
// checks to one of these.
func BenchmarkEd25519Verify(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	digest := []byte("sha256:4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b")
	sig, err := priv.Sign(nil, digest, &ed25519.Options{Context: sign.Context})
	if err != nil {
		b.Fatal(err)
	}
	expanded, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		b.Fatal(err)
	}
	opts := &voi.Options{Context: sign.Context, Verify: voi.VerifyOptionsFIPS_186_5}
	b.Run("curve25519-voi", func(b *testing.B) {
		for b.Loop() {
			if !voi.VerifyExpandedWithOptions(expanded, digest, sig, opts) {
				b.Fatal("the signature does not verify")
			}
		}
	})
	b.Run("curve25519-voi-batch-of-64", func(b *testing.B) {
		for b.Loop() {
			bv := voi.NewBatchVerifier()
			for range 64 {
				bv.AddExpandedWithOptions(expanded, digest, sig, opts)
			}
			if !bv.VerifyBatchOnly(nil) {
				b.Fatal("the batch does not verify")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(64*b.N), "µs/signature")
	})
	b.Run("crypto-ed25519", func(b *testing.B) {
		for b.Loop() {
			if err := ed25519.VerifyWithOptions(pub, digest, sig, &ed25519.Options{Context: sign.Context}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
