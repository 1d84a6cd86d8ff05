package send

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sendtwice/sendtwice/internal/sign"
)

// Approver is one trusted reviewer: the name an approval signed with the
// key must carry in approved_by, the Ed25519 public key, and the caller
// scopes the reviewer may approve requests for ("*" alone: every scope;
// none: only "default", where requests that name no scope land).
type Approver struct {
	Name      string
	PublicKey ed25519.PublicKey
	Scopes    []string
}

// TrustedApprovers are the reviewers whose signatures the executors accept:
// what their trusted-approvers file names.
type TrustedApprovers struct {
	keys *sign.Keyring
}

// LoadTrustedApprovers reads a trusted-approvers file (the executors'
// --trusted-approvers; publisher keygen --trusted writes one). A file that
// cannot be read matches its os error (fs.ErrNotExist, ...); one that
// does not say who is trusted matches ErrInvalid.
func LoadTrustedApprovers(path string) (*TrustedApprovers, error) {
	kr, err := sign.LoadTrusted(path)
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("send: reading the trusted approvers: %w", pathErr)
	case err != nil:
		return nil, fmt.Errorf("%w: the trusted approvers in %s: %s", ErrInvalid, path, trustedReason(err, path))
	}
	return &TrustedApprovers{keys: kr}, nil
}

// trustedReason is why the trusted-approvers file at path was refused,
// without the internal package's words around it: its sentinel and the
// path, which send's error names itself.
func trustedReason(err error, path string) string {
	reason := err.Error()
	for _, prefix := range []string{sign.ErrKeyFile.Error() + ": ", path + ": ", sign.ErrKeyFile.Error() + ": ", "sign: "} {
		reason = strings.TrimPrefix(reason, prefix)
	}
	return reason
}

// NewTrustedApprovers trusts exactly the given approvers.
func NewTrustedApprovers(approvers ...Approver) (*TrustedApprovers, error) {
	list := make([]sign.Approver, 0, len(approvers))
	for _, a := range approvers {
		if len(a.PublicKey) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: approver %q: a public key of %d bytes, want %d", ErrInvalid, a.Name, len(a.PublicKey), ed25519.PublicKeySize)
		}
		e := sign.ApproverFor(a.Name, a.PublicKey)
		e.Scopes = a.Scopes
		list = append(list, e)
	}
	kr, err := sign.NewKeyring(list...)
	if err != nil {
		return nil, fmt.Errorf("%w: the trusted approvers: %v", ErrInvalid, err)
	}
	return &TrustedApprovers{keys: kr}, nil
}

// Len is the number of trusted approvers.
func (t *TrustedApprovers) Len() int { return t.keys.Len() }

// NameOf returns the name the trusted approvers give the key with this id
// (the key_id an approval signed with it carries).
func (t *TrustedApprovers) NameOf(keyID string) (string, bool) {
	a, err := t.keys.Lookup(keyID)
	if err != nil {
		return "", false
	}
	return a.Name, true
}
