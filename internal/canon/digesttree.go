package canon

import (
	"crypto/sha256"
	"encoding/hex"
)

// DigestTree returns the digest of a value tree as produced by Parse, without
// parsing it again: "sha256:" + hex(SHA-256(Encode(v))).
func DigestTree(v any) (string, error) {
	c, err := Encode(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return digestPrefix + hex.EncodeToString(sum[:]), nil
}
