package subjects

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
)

// Unknown is the subject token used when a message's intent id is unknown.
const Unknown = "_unknown"

// ScopeUnknown is the scope token of receipts and dead letters of a message
// delivered on a subject that names no scope (one published before subjects
// carried the scope). It starts with '_', so no caller scope is ever it.
const ScopeUnknown = "_unknown"

// Subject prefixes, one per stream.
const (
	approvals   = "approvals."
	receipts    = "receipts."
	deadletters = "deadletters."
)

// Approval is where an approved request for this key is published.
func Approval(scope, intentID string) string {
	return approvals + ScopeToken(scope) + "." + Token(intentID)
}

// Receipt is where receipts for this key are published.
func Receipt(scope, intentID string) string {
	return receipts + ScopeToken(scope) + "." + Token(intentID)
}

// DeadLetter is where a dead letter for this key is published.
func DeadLetter(scope, intentID string) string {
	return deadletters + ScopeToken(scope) + "." + Token(intentID)
}

// Receipts is the wildcard subject of every receipt of a scope: what a
// permission names to let a caller read its own scope's receipts.
func Receipts(scope string) string { return receipts + ScopeToken(scope) + ".>" }

// Approvals is the wildcard subject of every approval of a scope: what a
// permission names to let a caller publish for its own scope.
func Approvals(scope string) string { return approvals + ScopeToken(scope) + ".>" }

// ScopeToken turns a caller scope into one subject token:
// document.DefaultScope for an empty scope, the scope itself when it is a
// valid scope (document.ValidScope) or ScopeUnknown, else "_h-" and a hash.
// A hashed token starts with '_', which no valid scope does, so an invalid
// scope can never land in a valid scope's subjects, nor become a wildcard
// or more than one token.
func ScopeToken(scope string) string {
	switch {
	case scope == "":
		return document.DefaultScope
	case scope == ScopeUnknown, document.ValidScope(scope):
		return scope
	}
	return "_h-" + hash(scope)
}

// ScopeOfApproval returns the scope of an approvals subject
// (approvals.<scope>.<token>), or ScopeUnknown when the subject has not
// that form or its scope token is not a valid scope. The executor files a delivery's receipts and dead letters
// under the scope its subject names, so that they land where the one who
// could publish it may read them, never under another scope.
func ScopeOfApproval(subject string) string {
	rest, ok := strings.CutPrefix(subject, approvals)
	if !ok {
		return ScopeUnknown
	}
	scope, token, ok := strings.Cut(rest, ".")
	if !ok || token == "" || strings.Contains(token, ".") || !document.ValidScope(scope) {
		return ScopeUnknown
	}
	return scope
}

// Token turns an intent id into one subject token: Unknown for an empty id,
// the id itself when it is made of letters, digits, '-' and '_' only (and
// not too long), else "h-" and a hash.
func Token(id string) string {
	if id == "" {
		return Unknown
	}
	if Plain(id) {
		return id
	}
	return "h-" + hash(id)
}

// hash is 32 hex digits of the SHA-256 of s.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// Plain reports whether id is made of at most 128 ASCII letters, digits,
// '-' and '_' only (no wildcard, no separator), and so may stand in a
// subject token or a key as it is. The ledger's keys use it too.
func Plain(id string) bool {
	ok := len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	return ok
}
