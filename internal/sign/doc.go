// Package sign makes and checks reviewers' signatures on approvals: Ed25519
// with a context string (Ed25519ctx), so that an approval signature can never
// be taken for a signature of another kind, over the canonical digest of the
// approval without its signature member.
//
// It also reads and writes key files: a private key (PKCS#8 PEM, file mode
// 0600) for a reviewer, and a trusted-approvers file (names, public keys and
// the caller scopes each approver may approve: only "default" when an entry
// names none, every scope for ["*"]) for executors. It must never print, log or put into an error message any
// private key material.
//
// It must never import NATS or Pebble: keys and signatures depend on no
// transport and no store.
package sign
