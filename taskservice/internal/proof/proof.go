package proof

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// MinKeyBytes is the shortest mark key accepted: 256 bits.
const MinKeyBytes = 32

// TagHexDigits is the length of a tag: 128 bits in lower-case hexadecimal.
const TagHexDigits = 32

// ErrKey is wrapped by CheckKey for a key too short to make tags with.
var ErrKey = errors.New("proof: the mark key is too short")

// CheckKey refuses a key shorter than MinKeyBytes. A nil key is allowed: it
// means the adapter makes no tags.
func CheckKey(key []byte) error {
	if key != nil && len(key) < MinKeyBytes {
		return fmt.Errorf("%w: %d bytes, fewer than %d", ErrKey, len(key), MinKeyBytes)
	}
	return nil
}

// Tag is the tag of parts for purpose under key: the first 128 bits of
// HMAC-SHA256(key, purpose and each part, each preceded by its length), in
// lower-case hexadecimal. Length prefixes keep ("ab", "c") and ("a", "bc")
// apart.
func Tag(key []byte, purpose string, parts ...string) string {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	for _, p := range append([]string{purpose}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))[:TagHexDigits]
}

// Valid reports whether tag is the tag of parts for purpose under key,
// comparing in constant time.
func Valid(key []byte, tag, purpose string, parts ...string) bool {
	return hmac.Equal([]byte(tag), []byte(Tag(key, purpose, parts...)))
}
