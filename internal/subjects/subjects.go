package subjects

import (
	"crypto/sha256"
	"encoding/hex"
)

// Unknown is the subject token used when a message's intent id is unknown.
const Unknown = "_unknown"

// Approval is where an approved request for this intent is published.
func Approval(intentID string) string { return "approvals." + Token(intentID) }

// Receipt is where receipts for this intent are published.
func Receipt(intentID string) string { return "receipts." + Token(intentID) }

// DeadLetter is where a dead letter for this intent is published.
func DeadLetter(intentID string) string { return "deadletters." + Token(intentID) }

// Token turns an intent id into one subject token: Unknown for an empty id,
// the id itself when it is made of letters, digits, '-' and '_' only (and
// not too long), else "h-" and a hash.
func Token(id string) string {
	if id == "" {
		return Unknown
	}
	ok := len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h-" + hex.EncodeToString(sum[:16])
}
