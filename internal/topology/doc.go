// Package topology names and creates the JetStream streams and the consumer
// that carry approved requests, receipts and dead letters, idempotently at
// start: creating what is missing, updating what differs, never deleting.
//
// It must never set anything that weakens durability (memory storage, an
// interest or work-queue retention that would drop an approval before its
// receipt exists), and never use the stream's de-duplication window for
// anything but one publish call's own transport retries.
package topology
