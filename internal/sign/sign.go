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
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
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

// Approver is a trusted reviewer: a name, a public key and the caller
// scopes it may approve requests for.
type Approver struct {
	Name      string `json:"name"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // base64url, 32 bytes
	// Scopes are the caller scopes (document.ValidScope) whose requests the
	// approver may approve; AllScopes alone means every scope. Empty (the
	// member absent from the file) means only document.DefaultScope, so
	// that a file written before scopes existed grants no other scope.
	Scopes   []string `json:"scopes,omitempty"`
	key      ed25519.PublicKey
	expanded *voi.ExpandedPublicKey
}

// AllScopes, as an approver's only scope, lets it approve for every scope.
const AllScopes = "*"

// MaxScopes bounds how many scopes one approver entry names.
const MaxScopes = 1024

// MayApprove reports whether the approver may approve a request whose key
// lies in scope.
func (a Approver) MayApprove(scope string) bool {
	for _, s := range a.ScopeList() {
		if s == AllScopes || s == scope {
			return true
		}
	}
	return false
}

// ScopeList is the scopes the approver may approve, as the file grants
// them: its Scopes, or [document.DefaultScope] when it names none.
func (a Approver) ScopeList() []string {
	if len(a.Scopes) == 0 {
		return []string{document.DefaultScope}
	}
	return append([]string(nil), a.Scopes...)
}

// CheckScopes refuses a list of scopes that an approver entry cannot carry:
// an empty list (leave the member out for the default scope alone), a
// scope that is not document.ValidScope nor AllScopes, a scope named twice,
// AllScopes beside other scopes, or more than MaxScopes. path names the
// list in errors, such as $.approvers[0].scopes.
func CheckScopes(path string, scopes []string) error {
	if scopes == nil {
		return nil
	}
	switch {
	case len(scopes) == 0:
		return fmt.Errorf("%w: %s is empty; leave it out to allow only the scope %q, or name the scopes (%q for all)", ErrScope, path, document.DefaultScope, AllScopes)
	case len(scopes) > MaxScopes:
		return fmt.Errorf("%w: %s names %d scopes; at most %d are allowed (use %q for all)", ErrScope, path, len(scopes), MaxScopes, AllScopes)
	}
	seen := map[string]int{}
	for i, s := range scopes {
		if s != AllScopes && !document.ValidScope(s) {
			return fmt.Errorf("%w: %s[%d] is %q: a scope is 1 to %d lower-case letters, digits, '_' or '-', starting with a letter or a digit, or %q for all scopes",
				ErrScope, path, i, s, document.MaxScopeBytes, AllScopes)
		}
		if j, dup := seen[s]; dup {
			return fmt.Errorf("%w: %s[%d] names %q again (already at %s[%d])", ErrScope, path, i, s, path, j)
		}
		seen[s] = i
	}
	if _, all := seen[AllScopes]; all && len(scopes) > 1 {
		return fmt.Errorf("%w: %s names %q beside other scopes; %q alone already allows every scope", ErrScope, path, AllScopes, AllScopes)
	}
	return nil
}

// Keyring holds the trusted approvers by key id. Its approvers can be
// replaced as a whole while it is in use (Replace), so that an executor can
// reload its trusted-approvers file without a restart.
type Keyring struct{ set atomic.Pointer[keyset] }

type keyset struct {
	byID map[string]Approver
	list []Approver // in the order given
	// verified remembers the signatures that verified under these keys.
	verified *verifiedSet
}

// NewKeyring returns a keyring trusting the given public keys under names.
// It refuses a key id or a name listed twice (names compared ignoring case):
// one key under two names, or two keys under one name, makes approved_by
// ambiguous.
func NewKeyring(approvers ...Approver) (*Keyring, error) {
	set := &keyset{byID: map[string]Approver{}, verified: newVerifiedSet()}
	names := map[string]int{}
	ids := map[string]int{}
	for i, a := range approvers {
		raw, ok := decodeCanonical(a.PublicKey, ed25519.PublicKeySize)
		if !ok {
			return nil, fmt.Errorf("%w: approvers[%d].public_key is not the canonical unpadded base64url of an Ed25519 public key", ErrKeyFile, i)
		}
		a.key = raw
		var err error
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
		if err := CheckScopes(fmt.Sprintf("approvers[%d].scopes", i), a.Scopes); err != nil {
			return nil, err
		}
		a.Scopes = append([]string(nil), a.Scopes...)
		if j, dup := ids[a.KeyID]; dup {
			return nil, fmt.Errorf("%w: approvers[%d].key_id %q is already listed at approvers[%d] (name %q): a key is trusted under one name only",
				ErrKeyFile, i, a.KeyID, j, approvers[j].Name)
		}
		folded := strings.ToLower(a.Name)
		if j, dup := names[folded]; dup {
			return nil, fmt.Errorf("%w: approvers[%d].name %q is already given to approvers[%d] (key %s): each approver has one name of its own",
				ErrKeyFile, i, a.Name, j, approvers[j].KeyID)
		}
		ids[a.KeyID], names[folded] = i, i
		set.byID[a.KeyID] = a
		set.list = append(set.list, a)
	}
	kr := &Keyring{}
	kr.set.Store(set)
	return kr, nil
}

func (kr *Keyring) current() *keyset {
	if kr == nil {
		return nil
	}
	return kr.set.Load()
}

// Approvers lists the trusted approvers, in the order they were given.
func (kr *Keyring) Approvers() []Approver {
	if s := kr.current(); s != nil {
		return append([]Approver(nil), s.list...)
	}
	return nil
}

// Replace makes kr trust exactly next's approvers, at once for every check
// that starts afterwards, and reports which entries (name, key and scopes)
// were added and which removed. A key whose name or scopes changed is both.
func (kr *Keyring) Replace(next *Keyring) (added, removed []Approver) {
	ns := next.current()
	if ns == nil {
		ns = &keyset{byID: map[string]Approver{}}
	}
	old := kr.set.Swap(ns)
	if old == nil {
		old = &keyset{byID: map[string]Approver{}}
	}
	for _, a := range ns.list {
		if o, ok := old.byID[a.KeyID]; !ok || !sameEntry(o, a) {
			added = append(added, a)
		}
	}
	for _, a := range old.list {
		if n, ok := ns.byID[a.KeyID]; !ok || !sameEntry(n, a) {
			removed = append(removed, a)
		}
	}
	return added, removed
}

// sameEntry reports whether two entries of one key grant the same: the same
// name and the same scopes.
func sameEntry(a, b Approver) bool {
	as, bs := a.ScopeList(), b.ScopeList()
	slices.Sort(as)
	slices.Sort(bs)
	return a.Name == b.Name && slices.Equal(as, bs)
}

// ApproverFor returns the approver entry for a public key.
func ApproverFor(name string, pub ed25519.PublicKey) Approver {
	return Approver{Name: name, KeyID: KeyID(pub), PublicKey: base64.RawURLEncoding.EncodeToString(pub), key: pub}
}

// Lookup finds a trusted approver by key id.
func (kr *Keyring) Lookup(keyID string) (Approver, error) {
	if s := kr.current(); s != nil {
		if a, ok := s.byID[keyID]; ok {
			return a, nil
		}
	}
	return Approver{}, fmt.Errorf("%w %q: not among the trusted approvers", ErrUnknownKey, keyID)
}

// VerifyApproval checks the signature of an approval value tree, signed by
// keyID, against the keyring, and returns the approver.
//
// A signature that verified is remembered (bounded, the most recent kept):
// the same public key, digest and signature again, as when an approval is
// resent or redelivered, is accepted without repeating the Ed25519 check.
// Anything that differs, in the approval or in the signature, is checked
// afresh, and a signature that failed is never remembered.
func (kr *Keyring) VerifyApproval(approval map[string]any, keyID, signature string) (Approver, error) {
	s := kr.current()
	var a Approver
	var ok bool
	if s != nil {
		a, ok = s.byID[keyID]
	}
	if !ok {
		return Approver{}, fmt.Errorf("%w %q: not among the trusted approvers", ErrUnknownKey, keyID)
	}
	d, err := UnsignedDigest(approval)
	if err != nil {
		return Approver{}, err
	}
	k := verifiedKey{digest: d, signature: signature}
	copy(k.pub[:], a.key)
	if s.verified.has(&k) {
		return a, nil
	}
	if err := verifyExpanded(a.expanded, d, signature); err != nil {
		return Approver{}, err
	}
	s.verified.add(&k)
	return a, nil
}

// Len is the number of trusted approvers.
func (kr *Keyring) Len() int {
	if s := kr.current(); s != nil {
		return len(s.byID)
	}
	return 0
}

// trustedFile is the trusted-approvers file.
type trustedFile struct {
	Approvers []Approver `json:"approvers"`
}

// trustedLimits bound a trusted-approvers file.
var trustedLimits = canon.Limits{MaxBytes: 1 << 20, MaxDepth: 4}

// maxNameBytes bounds an approver's name, as approved_by is bounded.
const maxNameBytes = 256

// ReadTrusted reads a trusted-approvers file strictly, as every document is
// read: strict JSON (no duplicate members, no trailing data), exactly the
// members {"approvers":[{"name","key_id","public_key"}]} with their case,
// and optionally "scopes" (an array of scopes, see CheckScopes), strings
// where strings belong, at least one approver, and no key id or name listed
// twice. Errors name the file and the path in it.
func ReadTrusted(path string) ([]Approver, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign: reading the trusted approvers: %w", err)
	}
	approvers, err := parseTrusted(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyFile, path, err)
	}
	if _, err := NewKeyring(approvers...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return approvers, nil
}

// LoadTrusted reads a trusted-approvers file (ReadTrusted) into a keyring.
func LoadTrusted(path string) (*Keyring, error) {
	approvers, err := ReadTrusted(path)
	if err != nil {
		return nil, err
	}
	return NewKeyring(approvers...)
}

func parseTrusted(b []byte) ([]Approver, error) {
	v, err := canon.Parse(b, trustedLimits)
	if err != nil {
		return nil, err
	}
	top, err := members("$", v, "approvers")
	if err != nil {
		return nil, err
	}
	list, ok := top["approvers"].([]any)
	if !ok {
		return nil, fmt.Errorf("$.approvers must be an array, not %s", canon.TypeName(top["approvers"]))
	}
	if len(list) == 0 {
		return nil, errors.New("$.approvers names no approvers")
	}
	out := make([]Approver, 0, len(list))
	for i, e := range list {
		path := fmt.Sprintf("$.approvers[%d]", i)
		m, err := members(path, e, "name", "key_id", "public_key", "scopes?")
		if err != nil {
			return nil, err
		}
		var a Approver
		for _, f := range []struct {
			name string
			dst  *string
		}{{"name", &a.Name}, {"key_id", &a.KeyID}, {"public_key", &a.PublicKey}} {
			s, ok := m[f.name].(string)
			if !ok {
				return nil, fmt.Errorf("%s.%s must be a string, not %s", path, f.name, canon.TypeName(m[f.name]))
			}
			*f.dst = s
		}
		switch {
		case strings.TrimSpace(a.Name) == "":
			return nil, fmt.Errorf("%s.name is empty", path)
		case len(a.Name) > maxNameBytes:
			return nil, fmt.Errorf("%s.name is %d bytes long; at most %d are allowed", path, len(a.Name), maxNameBytes)
		case strings.IndexFunc(a.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return nil, fmt.Errorf("%s.name holds a control character", path)
		}
		if v, ok := m["scopes"]; ok {
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s.scopes must be an array of scopes, not %s", path, canon.TypeName(v))
			}
			a.Scopes = make([]string, 0, len(list))
			for j, e := range list {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("%s.scopes[%d] must be a string, not %s", path, j, canon.TypeName(e))
				}
				a.Scopes = append(a.Scopes, s)
			}
			if err := CheckScopes(path+".scopes", a.Scopes); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// members checks that v is an object holding exactly the named members, all
// of them but those marked optional ("scopes?"), with the case given.
func members(path string, v any, spec ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an object, not %s", path, canon.TypeName(v))
	}
	names := make([]string, len(spec))
	optional := map[string]bool{}
	for i, n := range spec {
		names[i] = strings.TrimSuffix(n, "?")
		optional[names[i]] = names[i] != n
	}
	var unknown []string
	for k := range m {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		hint := ""
		for _, n := range names {
			if strings.EqualFold(n, unknown[0]) {
				hint = fmt.Sprintf(" (member names are case-sensitive: did you mean %q?)", n)
			}
		}
		return nil, fmt.Errorf("%s.%s: member %q is not part of a trusted-approvers file%s", path, unknown[0], unknown[0], hint)
	}
	for _, n := range names {
		if _, ok := m[n]; !ok && !optional[n] {
			return nil, fmt.Errorf("%s.%s: required member %q is missing", path, n, n)
		}
	}
	return m, nil
}

// WriteTrusted writes a trusted-approvers file naming exactly approvers,
// replacing the file at once (a reader never sees half a file).
func WriteTrusted(path string, approvers ...Approver) error {
	if _, err := NewKeyring(approvers...); err != nil {
		return err
	}
	b, err := json.MarshalIndent(trustedFile{Approvers: approvers}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'), 0o644)
}

// AddTrusted adds an approver to a trusted-approvers file, keeping the
// approvers it names; it makes the file when there is none. It refuses a
// name or a key id the file already lists, and a file that does not load.
func AddTrusted(path string, a Approver) error {
	existing, err := ReadTrusted(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range existing {
		switch {
		case strings.EqualFold(e.Name, a.Name):
			return fmt.Errorf("%w: %s already names an approver %q (key %s); choose another name, or remove that entry first", ErrName, path, e.Name, e.KeyID)
		case e.KeyID == a.KeyID:
			return fmt.Errorf("%w: %s already lists key %s, as %q", ErrKeyFile, path, e.KeyID, e.Name)
		}
	}
	return WriteTrusted(path, append(existing, a)...)
}

// SetScopes replaces the scopes of the approver named name (compared
// ignoring case) in a trusted-approvers file, keeping every other entry as
// it is, and returns the changed entry. Nil scopes remove the member (the
// default scope alone). It refuses scopes that CheckScopes refuses, a name
// the file does not list, and a file that does not load; a refusal changes
// nothing.
func SetScopes(path, name string, scopes []string) (Approver, error) {
	if err := CheckScopes("scopes", scopes); err != nil {
		return Approver{}, err
	}
	existing, err := ReadTrusted(path)
	if err != nil {
		return Approver{}, err
	}
	for i, e := range existing {
		if strings.EqualFold(e.Name, name) {
			existing[i].Scopes = scopes
			if err := WriteTrusted(path, existing...); err != nil {
				return Approver{}, err
			}
			return existing[i], nil
		}
	}
	return Approver{}, fmt.Errorf("%w: %s names no approver %q", ErrName, path, name)
}

// writeAtomic replaces path with data through a temporary file in the same
// directory, keeping the mode of an existing file.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("sign: writing %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sign: writing %s: %w", path, err)
	}
	return nil
}

// WriteKeyPair writes NAME.key (private, mode 0600; refuses to overwrite) and
// NAME.pub in dir, and returns the public entry for a trusted-approvers file.
// Both files record the name (a "sendtwice-approver: NAME" line before the
// PEM block), so that an approval signed with the key can be checked to name
// its signer; the name must be a ValidName.
func WriteKeyPair(dir, name string, k *Key) (Approver, error) {
	if !ValidName(name) {
		return Approver{}, fmt.Errorf("%w: %q: use 1 to 64 letters, digits, dots, underscores or dashes, starting with a letter or a digit", ErrName, name)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		return Approver{}, fmt.Errorf("sign: encoding the private key: %w", err)
	}
	label := []byte(nameLabel + name + "\n")
	privPath := filepath.Join(dir, name+".key")
	f, err := os.OpenFile(privPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Approver{}, fmt.Errorf("sign: writing the private key: %w", err)
	}
	_, err = f.Write(label)
	if err == nil {
		err = pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	if err != nil {
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
	pubPEM := append(label, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})...)
	if err := os.WriteFile(filepath.Join(dir, name+".pub"), pubPEM, 0o644); err != nil {
		return Approver{}, fmt.Errorf("sign: writing the public key: %w", err)
	}
	k.Name = name
	return ApproverFor(name, k.Public()), nil
}

// recordedName reads the name line before a key file's PEM block: "" when
// there is none. Any other text there is refused, so that a mistyped line is
// not silently taken for no name.
func recordedName(path string, b []byte) (string, error) {
	i := strings.Index(string(b), "-----BEGIN ")
	if i < 0 {
		return "", nil
	}
	name := ""
	for _, line := range strings.Split(string(b[:i]), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		n, ok := strings.CutPrefix(line, nameLabel)
		switch {
		case !ok:
			return "", fmt.Errorf("%w: %s: unexpected text before the key; only a line %q may come first", ErrKeyFile, path, nameLabel+"NAME")
		case name != "":
			return "", fmt.Errorf("%w: %s records two names", ErrKeyFile, path)
		case !ValidName(n):
			return "", fmt.Errorf("%w: %s records the name %q, which is not a valid approver name", ErrKeyFile, path, n)
		}
		name = n
	}
	return name, nil
}

// LoadKey reads a private key file written by WriteKeyPair, with the name it
// records (Key.Name). It refuses a file that others than its owner may read.
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
	name, err := recordedName(path, b)
	if err != nil {
		return nil, err
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
	k := NewKey(priv)
	k.Name = name
	return k, nil
}
