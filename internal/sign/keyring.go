package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/sendtwice/sendtwice/internal/document"
)

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
		if a.expanded, err = expandKey(raw); err != nil {
			return nil, fmt.Errorf("%w: approvers[%d].public_key is %s", ErrKeyFile, i, strings.TrimPrefix(err.Error(), ErrBadKey.Error()+": "))
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
	sig, err := decodeSignature(signature)
	if err != nil {
		return Approver{}, err
	}
	if !verifier.verify(a.expanded, []byte(d), sig) {
		return Approver{}, ErrBadSignature
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
