// Package document defines the project's four documents — the action
// candidate, the task request, the approval and the receipt — and the envelope
// that carries candidate, request and approval as three separate members, with
// a strict decoder for each.
//
// The decoder is hand-written and exact: member names match byte for byte (no
// case folding), unknown and duplicate members are refused, required members
// must be present, null is distinct from missing, trailing data is refused,
// and input is bounded in size and nesting. A request's intent id must be in
// Unicode Normalization Form C, so that one intent has one spelling; nothing
// is normalised. Every refusal is an *Error naming the field path and the
// rule that failed.
//
// This package must never guess: it does not fill in an unknown assignee or
// due date, never merges one document into another (an approval is not written
// back into the candidate), and never accepts a document it cannot represent
// exactly. It performs no I/O, and must never import anything of NATS: the
// documents are the same on any transport.
package document
