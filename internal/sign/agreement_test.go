package sign

import (
	"crypto/ed25519"
	crand "crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// encodeSig is the approval encoding of raw signature bytes.
func encodeSig(sig []byte) string {
	return SignaturePrefix + base64.RawURLEncoding.EncodeToString(sig)
}

// agree checks that the expanded-key verification and the standard library
// give the same answer for one public key, digest and signature.
func agree(t testing.TB, pub []byte, digest string, sig []byte) (accepted bool) {
	t.Helper()
	std := Verify(ed25519.PublicKey(pub), digest, encodeSig(sig)) == nil
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		if std {
			t.Fatalf("the standard library accepts a signature under public key %x, which does not expand: %v", pub, err)
		}
		return false
	}
	fast := verifyExpanded(x, digest, encodeSig(sig)) == nil
	if std != fast {
		t.Fatalf("public key %x, digest %q, signature %x: standard library accepts=%v, expanded key accepts=%v", pub, digest, sig, std, fast)
	}
	return std
}

// order is the order of the prime-order subgroup, ℓ = 2^252 + 27742317777372353535851937790883648493.
var order, _ = new(big.Int).SetString("7237005577332262213973186563042994173245446766640373010193716398327463468489", 10)

func TestExpandedVerifyAgreesWithTheStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], rng.Uint64())
		binary.LittleEndian.PutUint64(seed[8:], uint64(i))
		priv := ed25519.NewKeyFromSeed(seed[:])
		pub := priv.Public().(ed25519.PublicKey)
		digest := "sha256:" + base64.RawURLEncoding.EncodeToString(seed[:])
		sig, err := priv.Sign(nil, []byte(digest), &ed25519.Options{Context: Context})
		if err != nil {
			t.Fatal(err)
		}

		if !agree(t, pub, digest, sig) {
			t.Fatalf("a valid signature was refused by both")
		}
		// A flipped bit anywhere in the signature.
		bad := append([]byte(nil), sig...)
		bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
		if agree(t, pub, digest, bad) {
			t.Fatalf("a signature with a flipped bit was accepted by both")
		}
		// Another digest, another key.
		if agree(t, pub, digest+"0", sig) {
			t.Fatal("a signature over another digest was accepted by both")
		}
		// A plain Ed25519 signature (no context) over the same digest.
		plain := ed25519.Sign(priv, []byte(digest))
		if agree(t, pub, digest, plain) {
			t.Fatal("a signature without the context was accepted by both")
		}
		// S + ℓ: the same equation, a non-canonical S, refused by both.
		s := new(big.Int).SetBytes(reverse(sig[32:]))
		s.Add(s, order)
		if s.BitLen() <= 256 {
			nc := append(append([]byte(nil), sig[:32]...), reverse(s.FillBytes(make([]byte, 32)))...)
			if agree(t, pub, digest, nc) {
				t.Fatal("a signature with a non-canonical S was accepted by both")
			}
		}
	}
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return r
}

func TestSmallOrderKeysAreRefusedWhenTheKeyringIsLoaded(t *testing.T) {
	identity := make([]byte, 32)
	identity[0] = 1 // y = 1: the neutral element, of order 1
	// With the neutral element as the public key and as R, and S = 0, the
	// verification equation holds for any message: both implementations
	// accept it, which is why the keyring must not take such a key.
	forged := append(append([]byte(nil), identity...), make([]byte, 32)...)
	if !agree(t, identity, "sha256:anything", forged) {
		t.Fatal("expected the forgery under the neutral element to verify (cofactorless, as the standard library does)")
	}
	a := Approver{Name: "nobody", KeyID: KeyID(identity), PublicKey: base64.RawURLEncoding.EncodeToString(identity)}
	if _, err := NewKeyring(a); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("NewKeyring with the neutral element: err = %v, want %v", err, ErrKeyFile)
	}
}

// TestMixedOrderPublicKeysGetTheSameAnswers uses a public key with a
// small-order component, A' = aB + T with T of order 2. It is not of small
// order, so a keyring takes it. A signature its holder makes (R = rB,
// S = r + k·a with k the challenge over A') satisfies the cofactorless
// equation only when k is even; each signature must get the same answer from
// both checks, and both answers must occur.
func TestMixedOrderPublicKeysGetTheSameAnswers(t *testing.T) {
	seed := make([]byte, 32)
	seed[0] = 9
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	a, err := scalar.NewFromBytesModOrder(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	var A curve.EdwardsPoint
	A.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
	A.Add(&A, orderTwoPoint(t))
	var ac curve.CompressedEdwardsY
	ac.SetEdwardsPoint(&A)
	pub := ac[:]
	if smallOrder(pub) {
		t.Fatal("aB + T reported as small order")
	}
	if _, err := NewKeyring(Approver{Name: "mixed", KeyID: KeyID(pub), PublicKey: base64.RawURLEncoding.EncodeToString(pub)}); err != nil {
		t.Fatalf("a keyring refused a mixed-order key: %v", err)
	}

	accepted := 0
	const n = 40
	for i := range n {
		digest := fmt.Sprintf("sha256:mixed-%d", i)
		r, err := scalar.New().SetRandom(crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var R curve.EdwardsPoint
		R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
		var rc curve.CompressedEdwardsY
		rc.SetEdwardsPoint(&R)
		hash := sha512.New()
		hash.Write([]byte("SigEd25519 no Ed25519 collisions"))
		hash.Write([]byte{0, byte(len(Context))})
		hash.Write([]byte(Context))
		hash.Write(rc[:])
		hash.Write(pub)
		hash.Write([]byte(digest))
		k, err := scalar.NewFromBytesModOrderWide(hash.Sum(nil))
		if err != nil {
			t.Fatal(err)
		}
		S := scalar.New().Mul(k, a)
		S.Add(S, r)
		sig := make([]byte, 64)
		copy(sig, rc[:])
		if err := S.ToBytes(sig[32:]); err != nil {
			t.Fatal(err)
		}
		if agree(t, pub, digest, sig) {
			accepted++
		}
	}
	if accepted == 0 || accepted == n {
		t.Fatalf("%d of %d signatures accepted by both; expected some of each (the challenge's parity decides)", accepted, n)
	}
}

// orderTwoPoint is (0, -1), the point of order 2.
func orderTwoPoint(t *testing.T) *curve.EdwardsPoint {
	t.Helper()
	var enc [32]byte // y = p - 1, little-endian
	enc[0] = 0xec
	for i := 1; i < 31; i++ {
		enc[i] = 0xff
	}
	enc[31] = 0x7f
	var c curve.CompressedEdwardsY
	var p curve.EdwardsPoint
	if _, err := c.SetBytes(enc[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetCompressedY(&c); err != nil {
		t.Fatal(err)
	}
	return &p
}

// FuzzVerifyAgreement feeds arbitrary public keys, digests and signatures to
// both verifications; they must agree on every input.
func FuzzVerifyAgreement(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	sig, _ := priv.Sign(nil, []byte("sha256:x"), &ed25519.Options{Context: Context})
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), "sha256:x", sig)
	f.Add(make([]byte, 32), "", make([]byte, 64))
	f.Fuzz(func(t *testing.T, pub []byte, digest string, sig []byte) {
		if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
			return
		}
		agree(t, pub, digest, sig)
	})
}
