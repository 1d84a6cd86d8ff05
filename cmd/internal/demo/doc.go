// Package demo plays the project's story end to end in a temporary
// directory: an embedded NATS server with JetStream, the fake task service,
// an executor, and publishers sending the seed scenario's approvals, with the
// service restarted, a task deleted by its owner and its approval sent
// again (replayed, task deleted: the key outlives the task), the service
// replaced by a fresh one, and made to drop a reply. It prints one table and
// reports whether every row is what it must be.
//
// Told against a real task service (Options.Service, such as a CalDAV
// collection), the fake service is stopped and the story uses intent ids
// new in every run; a service that forgets a key with its task is given the
// executors' intent ledger in the run's embedded server, as serve gives it.
// Such a service keeps no counters, so the table shows the receipts and the
// tasks the service itself lists after each step, and says where each
// figure comes from. The story's requests are in a scope of their own
// (Scope, "sendtwice-demo") with titles that start "[sendtwice demo] ", and
// at its end it deletes the tasks it made (unless Options.KeepTasks), so
// that the service lists what it listed before the run: its last row shows
// that listing.
//
// It must never fake a row: each figure printed is read from a receipt, from
// the fake task service's counters or from a real service's own listing at
// that moment.
//
// It must never import a test rig or pgx: what it shows is the pipeline
// as shipped.
package demo
