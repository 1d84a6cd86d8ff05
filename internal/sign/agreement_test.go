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
	"strings"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// encodeSig is the approval encoding of raw signature bytes.
func encodeSig(sig []byte) string {
	return SignaturePrefix + base64.RawURLEncoding.EncodeToString(sig)
}

// agree checks that Verify (the executors' check) and the standard library
// give the same answer for one public key, digest and signature.
func agree(t testing.TB, pub []byte, digest string, sig []byte) (accepted bool) {
	t.Helper()
	ours := Verify(ed25519.PublicKey(pub), digest, encodeSig(sig)) == nil
	std := ed25519.VerifyWithOptions(ed25519.PublicKey(pub), []byte(digest), sig, &ed25519.Options{Context: Context}) == nil
	if std != ours {
		t.Fatalf("public key %x, digest %q, signature %x: standard library accepts=%v, Verify accepts=%v", pub, digest, sig, std, ours)
	}
	return std
}

// rawChecks are the two equations on any key, as a keyring's refusal is not
// in their way: the cofactored one of checkSignature and the standard
// library's cofactorless one.
func rawChecks(t testing.TB, pub []byte, digest string, sig []byte) (cofactored, cofactorless bool) {
	t.Helper()
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		t.Fatalf("public key %x does not expand: %v", pub, err)
	}
	return checkSignature(x, []byte(digest), sig),
		ed25519.VerifyWithOptions(ed25519.PublicKey(pub), []byte(digest), sig, &ed25519.Options{Context: Context}) == nil
}

// order is the order of the prime-order subgroup, ℓ = 2^252 + 27742317777372353535851937790883648493.
var order, _ = new(big.Int).SetString("7237005577332262213973186563042994173245446766640373010193716398327463468489", 10)

// Signatures made by signing, and each of them corrupted, get the same
// answer from the executors' check as from crypto/ed25519.
func TestSignaturesMadeBySigningGetTheStandardLibrarysAnswers(t *testing.T) {
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
		nc := append(append([]byte(nil), sig[:32]...), reverse(s.FillBytes(make([]byte, 32)))...)
		if agree(t, pub, digest, nc) {
			t.Fatal("a signature with a non-canonical S was accepted by both")
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
	// With the neutral element as the public key and as R, and S = 0, both
	// equations hold for any message, which is why no check may take such
	// a key.
	forged := append(append([]byte(nil), identity...), make([]byte, 32)...)
	if cofactored, cofactorless := rawChecks(t, identity, "sha256:anything", forged); !cofactored || !cofactorless {
		t.Fatalf("expected the forgery under the neutral element to satisfy both equations, got %v and %v", cofactored, cofactorless)
	}
	a := Approver{Name: "nobody", KeyID: KeyID(identity), PublicKey: base64.RawURLEncoding.EncodeToString(identity)}
	if _, err := NewKeyring(a); !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "small-order point") {
		t.Fatalf("NewKeyring with the neutral element: err = %v, want %v naming a small-order point", err, ErrKeyFile)
	}
	if err := Verify(ed25519.PublicKey(identity), "sha256:anything", encodeSig(forged)); !errors.Is(err, ErrBadKey) {
		t.Fatalf("Verify with the neutral element: err = %v, want %v", err, ErrBadKey)
	}
}

// mixedOrderKey is A' = aB + T with T of order 2, and a, the scalar of its
// prime-order part.
func mixedOrderKey(t *testing.T) (pub []byte, a *scalar.Scalar) {
	t.Helper()
	seed := make([]byte, 32)
	seed[0] = 9
	a = keyScalar(t, seed)
	var A curve.EdwardsPoint
	A.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
	A.Add(&A, orderTwoPoint(t))
	var ac curve.CompressedEdwardsY
	ac.SetEdwardsPoint(&A)
	return ac[:], a
}

// keyScalar is the secret scalar of the Ed25519 key with this seed.
func keyScalar(t testing.TB, seed []byte) *scalar.Scalar {
	t.Helper()
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	a, err := scalar.NewFromBytesModOrder(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// signWith makes the signature of digest that the holder of scalar a makes
// for public key pub with nonce point R = rB + T: S = r + k·a, with k the
// Ed25519ctx challenge over R, pub and digest.
func signWith(t testing.TB, pub []byte, a *scalar.Scalar, digest string, T *curve.EdwardsPoint) []byte {
	t.Helper()
	r, err := scalar.New().SetRandom(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var R curve.EdwardsPoint
	R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
	if T != nil {
		R.Add(&R, T)
	}
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
	return sig
}

// A public key with a small-order component, A' = aB + T with T of order 2,
// is not of small order, yet no generated key is like it, and whether its
// holder's signatures verify depends on the equation: every one satisfies
// the cofactored one, only those with an even challenge the cofactorless
// one. A keyring refuses it, so that no check ever depends on the equation
// through the key.
func TestMixedOrderPublicKeysAreRefusedWhenTheKeyringIsLoaded(t *testing.T) {
	pub, a := mixedOrderKey(t)
	both, cofactoredOnly := 0, 0
	const n = 40
	for i := range n {
		digest := fmt.Sprintf("sha256:mixed-%d", i)
		cofactored, cofactorless := rawChecks(t, pub, digest, signWith(t, pub, a, digest, nil))
		switch {
		case cofactored && cofactorless:
			both++
		case cofactored:
			cofactoredOnly++
		default:
			t.Fatalf("signature %d satisfies neither equation", i)
		}
	}
	if both == 0 || cofactoredOnly == 0 {
		t.Fatalf("%d of %d signatures satisfy both equations, %d the cofactored one alone; expected some of each", both, n, cofactoredOnly)
	}
	_, err := NewKeyring(Approver{Name: "mixed", KeyID: KeyID(pub), PublicKey: base64.RawURLEncoding.EncodeToString(pub)})
	if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "small-order component") {
		t.Fatalf("NewKeyring with a mixed-order key: err = %v, want %v naming its small-order component", err, ErrKeyFile)
	}
}

// With a key of prime order (every key a keyring takes), the executors'
// check and crypto/ed25519 differ on one kind of signature only: one whose
// R carries a small-order component, R = rB + T, which only the holder of
// the private key can make (S = r + k·a needs a). The executors accept it,
// as RFC 8032's cofactored equation does; crypto/ed25519 refuses it.
func TestATorsionComponentInRIsTheOnlyDifference(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	pub := []byte(k.Public())
	a := keyScalar(t, k.private.Seed())
	digest := "sha256:torsion"
	honest := signWith(t, pub, a, digest, nil)
	if !agree(t, pub, digest, honest) {
		t.Fatal("a signature made with the key's own scalar is refused")
	}
	crafted := signWith(t, pub, a, digest, orderTwoPoint(t))
	if err := Verify(ed25519.PublicKey(pub), digest, encodeSig(crafted)); err != nil {
		t.Fatalf("the executors' check refused a signature satisfying the cofactored equation: %v", err)
	}
	if ed25519.VerifyWithOptions(ed25519.PublicKey(pub), []byte(digest), crafted, &ed25519.Options{Context: Context}) == nil {
		t.Fatal("crypto/ed25519 accepted a signature whose R has a small-order component")
	}
	if torsionFreeR(crafted) {
		t.Fatal("the crafted R reads as of prime order")
	}
}

// torsionFreeR reports whether a signature's R decodes to a point of prime
// order.
func torsionFreeR(sig []byte) bool {
	var c curve.CompressedEdwardsY
	var p curve.EdwardsPoint
	if _, err := c.SetBytes(sig[:32]); err != nil {
		return false
	}
	if _, err := p.SetCompressedY(&c); err != nil {
		return false
	}
	return p.IsTorsionFree()
}

// orderTwoPoint is (0, -1), the point of order 2.
func orderTwoPoint(t testing.TB) *curve.EdwardsPoint {
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
// the executors' check and to crypto/ed25519. For every key a keyring takes,
// whatever crypto/ed25519 accepts is accepted, and a signature accepted by
// the executors' check alone has an R with a small-order component.
func FuzzVerifyAgreement(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	sig, _ := priv.Sign(nil, []byte("sha256:x"), &ed25519.Options{Context: Context})
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), "sha256:x", sig)
	f.Add(make([]byte, 32), "", make([]byte, 64))
	// A signature whose R has a small-order component, by the key's holder:
	// accepted by the executors' check alone.
	pub := []byte(priv.Public().(ed25519.PublicKey))
	f.Add(pub, "sha256:torsion", signWith(f, pub, keyScalar(f, priv.Seed()), "sha256:torsion", orderTwoPoint(f)))
	f.Fuzz(func(t *testing.T, pub []byte, digest string, sig []byte) {
		if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
			return
		}
		ours := Verify(ed25519.PublicKey(pub), digest, encodeSig(sig))
		if errors.Is(ours, ErrBadKey) {
			return
		}
		std := ed25519.VerifyWithOptions(ed25519.PublicKey(pub), []byte(digest), sig, &ed25519.Options{Context: Context}) == nil
		switch {
		case std && ours != nil:
			t.Fatalf("public key %x, digest %q, signature %x: crypto/ed25519 accepts, the executors' check refuses: %v", pub, digest, sig, ours)
		case !std && ours == nil && torsionFreeR(sig):
			t.Fatalf("public key %x, digest %q, signature %x: accepted by the executors' check alone, with an R of prime order", pub, digest, sig)
		}
	})
}

// The non-canonical encodings of a point (y = p + k below 2^255, either sign
// of x) all decode to points of small order, so that the keyring refuses
// every one, and a key has one encoding.
func TestNonCanonicalKeysAreRefused(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	decoded := 0
	for k := int64(0); k < 19; k++ {
		y := new(big.Int).Add(p, big.NewInt(k))
		for _, sign := range []byte{0, 0x80} {
			enc := reverse(y.FillBytes(make([]byte, 32)))
			enc[31] |= sign
			var c curve.CompressedEdwardsY
			var pt curve.EdwardsPoint
			if _, err := c.SetBytes(enc); err == nil {
				if _, err := pt.SetCompressedY(&c); err == nil {
					decoded++
				}
			}
			if _, err := expandKey(enc); !errors.Is(err, ErrBadKey) {
				t.Errorf("y = p + %d, sign %#x: expandKey err = %v, want %v", k, sign, err, ErrBadKey)
			}
		}
	}
	if decoded == 0 {
		t.Fatal("no non-canonical encoding decodes to a point: the test shows nothing")
	}
	t.Logf("%d non-canonical encodings decode to points, all refused", decoded)
}

// Verify refuses, naming why, a key a keyring would refuse: of the wrong
// length, or not a point on the curve.
func TestVerifyRefusesAKeyThatIsNotOne(t *testing.T) {
	notOnCurve := make([]byte, 32)
	notOnCurve[0] = 2 // y = 2 gives no x on the curve
	for _, tc := range []struct {
		name, reason string
		pub          []byte
	}{
		{"a key of 31 bytes", "31 bytes, not the 32 of a public key", make([]byte, 31)},
		{"a y with no point", "not a point on the curve", notOnCurve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(ed25519.PublicKey(tc.pub), "sha256:x", encodeSig(make([]byte, 64)))
			if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Verify: err = %v, want %v saying %q", err, ErrBadKey, tc.reason)
			}
		})
	}
}
