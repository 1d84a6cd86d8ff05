// Package topology names and creates the JetStream streams and the consumer
// that carry approved requests, receipts and dead letters, idempotently at
// start: creating what is missing, updating what differs, never deleting.
// It records what the server applied (the configuration of each stream and
// of the consumer, in the key-value bucket sendtwice-topology), and compares a
// live configuration with that record field by field (Provisioned.Diff), so
// that what reads the streams later judges them against what was
// provisioned rather than against what they say of themselves now.
//
// It must never set anything that weakens durability (memory storage, an
// interest or work-queue retention that would drop an approval before its
// receipt exists), and never use the stream's de-duplication window for
// anything but one publish call's own transport retries. The record must
// only ever be written by provisioning (Ensure), from what the server
// returned, never from a configuration read back from the streams.
//
// The same bucket holds, under its own key, which task service the
// executors call and where (TaskService: serve writes it at start), so that
// status and verify read the service the pipeline uses. It never holds a
// password or an API key.
//
// It must never import Pebble, nats-server or internal/executor: the
// executor provisions through it, not the other way round.
package topology
