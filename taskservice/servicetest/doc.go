// Package servicetest is the conformance suite of the taskservice
// contract: one set of rows, each a question whose answer decides whether
// a task service is safe behind an at-least-once pipeline, run against any
// implementation.
//
// The rows: a first call creates and a second with the same key and body
// replays it; another body under the same key is a conflict that keeps the
// first; another intent id with the same content creates a task of its
// own; concurrent callers with one key make one create; a retry after a
// lost reply replays; a resend after the task was deleted replays (or, for
// a service that forgets a key with its task, creates it again: a caveat);
// one intent id in two scopes is two keys; a key outlives a restart; a
// lookup right after a create sees it; the answers come from one scope.
//
// An adapter's whole test is one call:
//
//	func TestConformance(t *testing.T) {
//		servicetest.Run(t, func(t *testing.T) servicetest.Target {
//			return servicetest.Target{Service: newAdapter(t), Scope: "the service"}
//		}, servicetest.Features{Class: servicetest.KeepsKeys})
//	}
//
// Run runs each row as a subtest. What a row needs beyond the contract
// (losing a reply, deleting a task, restarting the service, counting its
// tasks, a lookup) is a hook of Target; a row whose hook is missing is
// skipped. Features says what the service's class can promise
// (KeepsKeys, CreateIfAbsent, NoKey), which decides what a row may answer.
//
// The executor's probe ("executor probe") measures the same rows against a
// live service through Rows and prints them as a table.
package servicetest
