package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/sendtwice/sendtwice/internal/canon"
)

// Context is the Ed25519ctx context string of approval signatures.
const Context = "sendtwice task-approval.v1"

// SignaturePrefix starts every encoded signature.
const SignaturePrefix = "ed25519:"

// Errors.
var (
	ErrUnknownKey   = errors.New("sign: unknown key")
	ErrBadSignature = errors.New("sign: signature does not verify")
	ErrKeyFile      = errors.New("sign: unusable key file")
	ErrBadKey       = errors.New("sign: unusable public key")
	ErrName         = errors.New("sign: not a usable approver name")
	ErrWrongSigner  = errors.New("sign: the approver is not the key's owner")
	ErrScope        = errors.New("sign: not a usable approver scope")
)

// namePattern is an approver name made at keygen: it names files, so it is a
// simple token (no path separators, no leading dot or dash).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether name can be given to a key at keygen: 1 to 64
// ASCII letters, digits, dots, underscores and dashes, starting with a
// letter or a digit. Such a name is safe as a file name in any directory.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// nameLabel starts the line, before the PEM block of a key file, that
// records the reviewer's name (explanatory text in RFC 7468's terms).
const nameLabel = "sendtwice-approver: "

// KeyID derives a key's id from its public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519-" + hex.EncodeToString(sum[:8])
}

// Key is a reviewer's signing key.
type Key struct {
	ID string
	// Name is the reviewer's name recorded in the key file at keygen, the
	// name the trusted-approvers file gives this key; empty for a key file
	// made before names were recorded, or a key not read from a file.
	Name    string
	private ed25519.PrivateKey
}

// CheckSigner refuses an approver name other than the one recorded with the
// key: executors reject an approval whose approved_by is not the name the
// trusted-approvers file gives its key. A key without a recorded name
// accepts any name.
func (k *Key) CheckSigner(by string) error {
	if k.Name == "" || by == k.Name {
		return nil
	}
	return fmt.Errorf("%w: the key %s was made for %q (publisher keygen --name %s), not for %q; an approval signed with it must say approved_by %q, or executors reject it at signature",
		ErrWrongSigner, k.ID, k.Name, k.Name, by, k.Name)
}

// String never shows the private key.
func (k *Key) String() string { return "sign.Key(" + k.ID + ")" }

// GoString never shows the private key.
func (k *Key) GoString() string { return k.String() }

// Public returns the key's public half.
func (k *Key) Public() ed25519.PublicKey { return k.private.Public().(ed25519.PublicKey) }

// NewKey wraps an Ed25519 private key.
func NewKey(priv ed25519.PrivateKey) *Key {
	return &Key{ID: KeyID(priv.Public().(ed25519.PublicKey)), private: priv}
}

// Generate makes a new random key.
func Generate() (*Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sign: generating a key: %w", err)
	}
	return NewKey(priv), nil
}

// Sign signs a digest string ("sha256:...").
func (k *Key) Sign(digest string) (string, error) {
	sig, err := k.private.Sign(nil, []byte(digest), &ed25519.Options{Context: Context})
	if err != nil {
		return "", fmt.Errorf("sign: signing: %w", err)
	}
	return SignaturePrefix + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Verify checks an encoded signature over digest with pub: the check an
// executor makes (see checkSignature), with a key that a keyring would take
// (see expandKey).
func Verify(pub ed25519.PublicKey, digest, signature string) error {
	sig, err := decodeSignature(signature)
	if err != nil {
		return err
	}
	x, err := expandKey(pub)
	if err != nil {
		return err
	}
	if !checkSignature(x, []byte(digest), sig) {
		return ErrBadSignature
	}
	return nil
}

// verifyOptions are RFC 8032's checks as FIPS 186-5 has them, with the
// approval context: S below the group order, R and A canonical encodings,
// and the cofactored group equation [8][S]B = [8]R + [8][k]A, the one RFC
// 8032 (section 5.1.7) states. Checking it allows many signatures to be
// checked together (batchVerifier). crypto/ed25519 checks the stricter
// cofactorless [S]B = R + [k]A instead: with the keys a keyring takes (of
// prime order, see expandKey) the two differ only on a signature whose R
// has a small-order component, which only the private key's holder can make
// (TestATorsionComponentInRIsTheOnlyDifference).
var verifyOptions = &voi.Options{Context: Context, Verify: voi.VerifyOptionsFIPS_186_5}

// checkSignature reports whether sig is a valid signature of msg by pub
// under verifyOptions.
func checkSignature(pub *voi.ExpandedPublicKey, msg, sig []byte) bool {
	return voi.VerifyExpandedWithOptions(pub, msg, sig, verifyOptions)
}

// expandKey decodes a public key and expands it for checking signatures
// (once: the expanded key halves the cost of a check). It refuses what is
// nobody's key: a point not on the curve and a point with a small-order
// component (of small order, signatures for it can be forged; of mixed
// order, whether a signature verifies depends on the check's equation). A
// key made by generating one is of prime order; every non-canonical encoding
// of a point is of one of small order (TestNonCanonicalKeysAreRefused).
func expandKey(pub []byte) (*voi.ExpandedPublicKey, error) {
	var c curve.CompressedEdwardsY
	var p curve.EdwardsPoint
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: %d bytes, not the %d of a public key", ErrBadKey, len(pub), ed25519.PublicKeySize)
	}
	if _, err := c.SetBytes(pub); err != nil {
		return nil, fmt.Errorf("%w: not a point on the curve", ErrBadKey)
	}
	if _, err := p.SetCompressedY(&c); err != nil {
		return nil, fmt.Errorf("%w: not a point on the curve", ErrBadKey)
	}
	if p.IsSmallOrder() {
		return nil, fmt.Errorf("%w: a small-order point, for which signatures can be forged", ErrBadKey)
	}
	if !p.IsTorsionFree() {
		return nil, fmt.Errorf("%w: a point with a small-order component, which no generated key has", ErrBadKey)
	}
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return x, nil
}

func decodeSignature(signature string) ([]byte, error) {
	raw, ok := strings.CutPrefix(signature, SignaturePrefix)
	if !ok {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrBadSignature, SignaturePrefix)
	}
	sig, ok := decodeCanonical(raw, ed25519.SignatureSize)
	if !ok {
		return nil, fmt.Errorf("%w: it is not the canonical unpadded base64url of an Ed25519 signature", ErrBadSignature)
	}
	return sig, nil
}

// strictB64 refuses non-zero padding bits; decodeCanonical also refuses the
// line breaks the decoder skips, so that one value has one encoding.
var strictB64 = base64.RawURLEncoding.Strict()

// decodeCanonical decodes unpadded base64url of exactly n bytes, and only
// its canonical form.
func decodeCanonical(s string, n int) ([]byte, bool) {
	b, err := strictB64.DecodeString(s)
	if err != nil || len(b) != n || strictB64.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

// UnsignedDigest is the digest an approval's signature covers: the canonical
// digest of the approval's value tree without its "signature" member.
func UnsignedDigest(approval map[string]any) (string, error) {
	return canon.DigestTreeWithout(approval, "signature")
}
