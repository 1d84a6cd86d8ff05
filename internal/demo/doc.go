// Package demo plays the project's story end to end in a temporary
// directory: an embedded NATS server with JetStream, the fake task service,
// an executor, and publishers sending the seed scenario's approvals, with the
// service restarted, replaced by a fresh one, and made to drop a reply. It
// prints one table and reports whether every row is what it must be.
//
// It must never fake a row: each figure printed is read from a receipt or
// from the task service's counters at that moment.
package demo
