// Package testenv starts, for tests, what the pipeline runs on: an embedded
// NATS server with JetStream (random port, store in a test directory, fsync
// before ack) and the fake task service over Pebble, plus executor instances
// in this process. Everything is real; nothing is mocked. StartNoConsumers
// adds a user with a publisher's rights and no consumer, and LimitConsumers
// caps the consumers of each stream, for the tests that show that sending
// and waiting need none. JetStream starts a bare server for a test that
// needs only a bucket of its own, and Ledger provisions and opens the
// executors' intent ledger on it, as the commands do.
//
// It is a test rig. Like the other rigs (cmd/internal/deploytest,
// internal/davtest, internal/redminetest, internal/proctest), it must never
// be imported by a production package: a command or any package's non-test
// files (internal/boundary checks it).
// It must never weaken what it starts to make a test pass: the server
// fsyncs before every ack as in production, and an executor started
// without a gate policy accepts unsigned approvals only because tests say
// so through this package, never through the executor's own defaults.
package testenv
