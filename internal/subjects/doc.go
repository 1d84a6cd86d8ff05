// Package subjects names the pipeline's NATS subjects for a key, the pair
// of a caller scope and an intent id: approvals.<scope>.<token>,
// receipts.<scope>.<token> and deadletters.<scope>.<token>.
//
// The scope comes first so that a NATS permission can confine a caller to
// its scope: a tenant allowed to publish on approvals.team-a.> and to read
// receipts.team-a.> can neither send an approval for another scope nor see
// another scope's receipts. A scope is one subject token as it is
// (document.ValidScope); an empty scope is document.DefaultScope; anything
// else is never placed in a subject as it is but hashed to a token that
// starts with '_', which no valid scope does. Tokens that start with '_'
// are the pipeline's own: ScopeUnknown names the scope of a message whose
// subject carries none. The intent token is the intent id itself when it
// is a safe subject token, else a hash of it.
//
// It is only the naming, so that the gate can compare a delivery's subject
// with the one its key must use: it must never import anything of NATS. It
// uses the standard library and package document, for what a scope is; the
// streams and the consumer that use these subjects are package topology's.
package subjects
