package sign

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sendtwice/sendtwice/internal/canon"
)

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
