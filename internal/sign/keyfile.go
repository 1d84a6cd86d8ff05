package sign

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

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
