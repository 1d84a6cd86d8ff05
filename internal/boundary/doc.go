// Package boundary holds the test that keeps the packages' nevers about
// imports true. It reads the module's import graph (go list -deps -json) and
// fails when a package reaches, directly or through others, a package its
// doc.go says it must never import:
//
//   - internal/canon and internal/subjects import only the standard library;
//   - internal/gate and internal/document import nothing of NATS;
//   - internal/provider imports no document, gate or sign;
//   - internal/metrics imports no gate;
//   - internal/executor imports no provider: it reaches task services only
//     through taskservice;
//   - taskservice, the public contract, imports only the standard library;
//   - no production package imports a test rig (internal/testenv,
//     internal/deploytest, internal/davtest, internal/redminetest).
//
// Each line is checked against the sentence that draws it in that package's
// doc.go, so that neither can change without the other, and every package
// but the commands has a doc.go that says what it must never do.
//
// The package has no code of its own and must never gain any: it is a test.
package boundary
