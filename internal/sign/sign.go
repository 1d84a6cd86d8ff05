package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
)

// KeyID derives a key's id from its public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519-" + hex.EncodeToString(sum[:8])
}

// Key is a reviewer's signing key.
type Key struct {
	ID      string
	private ed25519.PrivateKey
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

// Verify checks an encoded signature over digest with pub, using the
// standard library.
func Verify(pub ed25519.PublicKey, digest, signature string) error {
	sig, err := decodeSignature(signature)
	if err != nil {
		return err
	}
	if err := ed25519.VerifyWithOptions(pub, []byte(digest), sig, &ed25519.Options{Context: Context}); err != nil {
		return ErrBadSignature
	}
	return nil
}

// verifyOptions make the expanded-key check accept exactly what the standard
// library's ed25519.VerifyWithOptions accepts (cofactorless, non-canonical
// and small-order public keys as it has them), with the approval context.
var verifyOptions = &voi.Options{Context: Context, Verify: voi.VerifyOptionsStdLib}

// verifyExpanded is Verify with a public key expanded once: the same answer
// (TestExpandedVerifyAgreesWithTheStandardLibrary, FuzzVerifyAgreement) at
// about half the cost, which matters because every delivery of a signed
// approval is checked.
func verifyExpanded(pub *voi.ExpandedPublicKey, digest, signature string) error {
	sig, err := decodeSignature(signature)
	if err != nil {
		return err
	}
	if !voi.VerifyExpandedWithOptions(pub, []byte(digest), sig, verifyOptions) {
		return ErrBadSignature
	}
	return nil
}

// smallOrder reports whether a public key (already known to decode) is a
// point of small order: such a key is nobody's, and cofactorless verification
// accepts signatures for it that nobody made.
func smallOrder(pub []byte) bool {
	var c curve.CompressedEdwardsY
	var p curve.EdwardsPoint
	if _, err := c.SetBytes(pub); err != nil {
		return true
	}
	if _, err := p.SetCompressedY(&c); err != nil {
		return true
	}
	return p.IsSmallOrder()
}

func decodeSignature(signature string) ([]byte, error) {
	raw, ok := strings.CutPrefix(signature, SignaturePrefix)
	if !ok {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrBadSignature, SignaturePrefix)
	}
	sig, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: it is not a base64url Ed25519 signature", ErrBadSignature)
	}
	return sig, nil
}

// UnsignedDigest is the digest an approval's signature covers: the canonical
// digest of the approval's value tree without its "signature" member.
func UnsignedDigest(approval map[string]any) (string, error) {
	cp := make(map[string]any, len(approval))
	for k, v := range approval {
		if k != "signature" {
			cp[k] = v
		}
	}
	return canon.DigestTree(cp)
}

// Approver is a trusted reviewer: a name and a public key.
type Approver struct {
	Name      string `json:"name"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // base64url, 32 bytes
	key       ed25519.PublicKey
	expanded  *voi.ExpandedPublicKey
}

// Keyring holds the trusted approvers by key id.
type Keyring struct{ byID map[string]Approver }

// NewKeyring returns a keyring trusting the given public keys under names.
func NewKeyring(approvers ...Approver) (*Keyring, error) {
	kr := &Keyring{byID: map[string]Approver{}}
	for i, a := range approvers {
		raw, err := base64.RawURLEncoding.DecodeString(a.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: approvers[%d].public_key is not a base64url Ed25519 public key", ErrKeyFile, i)
		}
		a.key = raw
		if a.expanded, err = voi.NewExpandedPublicKey(voi.PublicKey(raw)); err != nil {
			return nil, fmt.Errorf("%w: approvers[%d].public_key is not a point on the curve", ErrKeyFile, i)
		}
		if smallOrder(raw) {
			return nil, fmt.Errorf("%w: approvers[%d].public_key is a small-order point, for which signatures can be forged", ErrKeyFile, i)
		}
		if want := KeyID(a.key); a.KeyID != want {
			return nil, fmt.Errorf("%w: approvers[%d].key_id is %q, but its public key's id is %q", ErrKeyFile, i, a.KeyID, want)
		}
		if strings.TrimSpace(a.Name) == "" {
			return nil, fmt.Errorf("%w: approvers[%d].name is empty", ErrKeyFile, i)
		}
		kr.byID[a.KeyID] = a
	}
	return kr, nil
}

// ApproverFor returns the approver entry for a public key.
func ApproverFor(name string, pub ed25519.PublicKey) Approver {
	return Approver{Name: name, KeyID: KeyID(pub), PublicKey: base64.RawURLEncoding.EncodeToString(pub), key: pub}
}

// Lookup finds a trusted approver by key id.
func (kr *Keyring) Lookup(keyID string) (Approver, error) {
	if kr != nil {
		if a, ok := kr.byID[keyID]; ok {
			return a, nil
		}
	}
	return Approver{}, fmt.Errorf("%w %q: not among the trusted approvers", ErrUnknownKey, keyID)
}

// VerifyApproval checks the signature of an approval value tree, signed by
// keyID, against the keyring, and returns the approver.
func (kr *Keyring) VerifyApproval(approval map[string]any, keyID, signature string) (Approver, error) {
	a, err := kr.Lookup(keyID)
	if err != nil {
		return Approver{}, err
	}
	d, err := UnsignedDigest(approval)
	if err != nil {
		return Approver{}, err
	}
	if err := verifyExpanded(a.expanded, d, signature); err != nil {
		return Approver{}, err
	}
	return a, nil
}

// Len is the number of trusted approvers.
func (kr *Keyring) Len() int {
	if kr == nil {
		return 0
	}
	return len(kr.byID)
}

// trustedFile is the trusted-approvers file.
type trustedFile struct {
	Approvers []Approver `json:"approvers"`
}

// LoadTrusted reads a trusted-approvers file.
func LoadTrusted(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign: reading the trusted approvers: %w", err)
	}
	var f trustedFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyFile, path, err)
	}
	if len(f.Approvers) == 0 {
		return nil, fmt.Errorf("%w: %s names no approvers", ErrKeyFile, path)
	}
	return NewKeyring(f.Approvers...)
}

// WriteTrusted writes a trusted-approvers file.
func WriteTrusted(path string, approvers ...Approver) error {
	b, err := json.MarshalIndent(trustedFile{Approvers: approvers}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteKeyPair writes NAME.key (private, mode 0600; refuses to overwrite) and
// NAME.pub in dir, and returns the public entry for a trusted-approvers file.
func WriteKeyPair(dir, name string, k *Key) (Approver, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		return Approver{}, fmt.Errorf("sign: encoding the private key: %w", err)
	}
	privPath := filepath.Join(dir, name+".key")
	f, err := os.OpenFile(privPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Approver{}, fmt.Errorf("sign: writing the private key: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return Approver{}, fmt.Errorf("sign: writing the private key: %w", err)
	}
	if err := f.Close(); err != nil {
		return Approver{}, fmt.Errorf("sign: writing the private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return Approver{}, fmt.Errorf("sign: encoding the public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(filepath.Join(dir, name+".pub"), pubPEM, 0o644); err != nil {
		return Approver{}, fmt.Errorf("sign: writing the public key: %w", err)
	}
	return ApproverFor(name, k.Public()), nil
}

// LoadKey reads a private key file written by WriteKeyPair. It refuses a
// file that others than its owner may read.
func LoadKey(path string) (*Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sign: reading the private key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %v); run chmod 600 %s", ErrKeyFile, path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign: reading the private key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s holds no PEM PRIVATE KEY block", ErrKeyFile, path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a PKCS#8 private key", ErrKeyFile, path)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an Ed25519 key", ErrKeyFile, path)
	}
	return NewKey(priv), nil
}
