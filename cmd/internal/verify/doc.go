// Package verify is the executor's verify command without its command
// line: it reads the executors' streams, the task service's record (or, for
// a service that keeps none, its listed tasks) and, with trusted approvers,
// re-runs the gate, then checks every invariant of the audit and reports
// each with its figures.
//
// It only reads: it must never publish, ack or call the task service's
// create endpoint, as the audit it runs must not. It must never import pgx
// or a test rig.
package verify
