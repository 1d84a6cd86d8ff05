package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// digestPrefix starts every digest.
const digestPrefix = "sha256:"

// Canonicalize parses data with DefaultLimits and returns its canonical (JCS)
// form.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Parse(data, DefaultLimits)
	if err != nil {
		return nil, err
	}
	// The canonical form is rarely longer than the input.
	return encode(v, len(data))
}

// CanonicalizeExact is Canonicalize with ExactLimits: it refuses a number
// literal that JCS would round.
func CanonicalizeExact(data []byte) ([]byte, error) {
	v, err := Parse(data, ExactLimits)
	if err != nil {
		return nil, err
	}
	return encode(v, len(data))
}

// DigestExact is Digest with ExactLimits: it refuses a number literal that
// JCS would round, so two different numbers never share a digest.
func DigestExact(data []byte) (string, error) {
	c, err := CanonicalizeExact(data)
	if err != nil {
		return "", err
	}
	return digestOf(c), nil
}

func digestOf(c []byte) string {
	sum := sha256.Sum256(c)
	return digestOfSum(sum[:])
}

// digestOfSum writes a SHA-256 sum as a digest.
func digestOfSum(sum []byte) string {
	var out [len(digestPrefix) + 2*sha256.Size]byte
	copy(out[:], digestPrefix)
	hex.Encode(out[len(digestPrefix):], sum)
	return string(out[:])
}

// Digest returns "sha256:" followed by the lower-case hex SHA-256 of the
// canonical form of data. Documents that differ only in member order or
// insignificant white space have the same digest.
func Digest(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	return digestOf(c), nil
}

// DigestValue returns the digest of the JSON encoding of v, as produced by
// encoding/json.Marshal: it is meant for Go structs. If json.Marshal fails
// (NaN, channels, cyclic values, ...) the error wraps ErrUnsupportedType and
// the encoding/json error. Note that json.Marshal
// replaces invalid UTF-8 in Go strings with U+FFFD rather than failing;
// callers digesting untrusted Go strings should check them with
// utf8.ValidString first (or build the JSON themselves and use Digest).
func DigestValue(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupportedType, err)
	}
	return Digest(data)
}

// ValidDigest reports whether s has the form of a digest: "sha256:" followed
// by exactly 64 lower-case hexadecimal digits.
func ValidDigest(s string) bool {
	if len(s) != len(digestPrefix)+2*sha256.Size || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
