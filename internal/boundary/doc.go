// Package boundary holds the test that keeps the packages' nevers about
// imports true. Every package of the module but the commands and the
// public packages states in its doc.go, in a sentence the test reads, what
// it must keep out (a public package, one an application imports: approval,
// send, sendtest, taskservice and its adapters and suite, has its doc.go
// for its users, so its rules, with the promises it keeps beyond its
// imports, stand in the test's publicRules, and a rule in its doc.go fails
// the test):
//
//	It must never import NATS, Pebble or a test rig.
//	It must never import anything but the standard library and taskservice.
//	It must never be imported by a production package.
//
// The words are few: NATS (anything of github.com/nats-io), the NATS
// client, nats-server, Pebble, pgx, Prometheus, go-webdav, go-ical,
// porcupine, the standard library, the rest of this module, a test rig (a
// package whose doc.go states the third example's rule), or a package of the
// module by its path (internal/gate, taskservice). A doc.go with no such
// sentence, with a word the test does not know, with a note in parentheses
// inside a rule's list, or with a sentence about imports in another form
// than the examples' (the verb negated otherwise, or followed by "no" or
// "nothing") fails it: the test would otherwise pass over a rule it cannot
// read. The examples are a code block, as go doc shows them, and
// the test skips code blocks.
//
// The test then reads the module's import graph (go list -deps -json) and
// fails, printing the chain of imports, when a package reaches, directly or
// through others, what its doc.go refuses. "Anything but" names all a
// package may import itself; what an allowed package imports is for its own
// doc.go to say. A few rules must stay stated, and a doc.go that drops one
// fails too: internal/canon, internal/queue and taskservice import only the
// standard library; taskservice/redmine only that, taskservice and the two
// small packages it shares with caldav; internal/gate, internal/document and
// internal/subjects nothing of NATS; internal/provider no document, gate or
// sign; cmd/internal/metrics no gate; internal/executor no provider; send and
// approval no Pebble, nats-server or test rig; sendtest, the test kit, which
// runs the server and the service, no pgx or test rig; and a test rig stays
// out of every production package.
//
// The package has no code of its own, and it must never import anything but
// the standard library: it is a test.
package boundary
