// Package bench is the load generator behind the bench command (cmd/bench): it measures
// the pipeline's durable end-to-end throughput and latency against an
// embedded or a running deployment, and, in the same run, the references the
// figures are compared with.
//
// Two modes:
//
//   - backlog: N approvals are stored on the APPROVALS stream first (in atomic
//     batches), then executors are started; the figure is the time until every
//     message is acked, which an executor does only once its receipt is
//     stored. Optionally with a store preloaded with many intents, and with
//     1, 2, 3, ... executor instances, each on a fresh backlog.
//   - live: K publishers (1 by default) offer approvals at a given rate,
//     each storing what is due as one atomic batch at a time; the figure is the
//     latency from each message's scheduled publish time to its receipt
//     being readable from the RECEIPTS stream (p50, p95, p99, max), and
//     that latency split into stages (publish, wait for a handler, gate,
//     service call, receipt batch and ack, receipt read).
//
// The references, measured with the same server (so the same sync setting),
// the same message size and the same concurrency:
//
//   - naive JetStream: consume, publish one receipt-sized message per
//     approval alone (waiting for its ack), ack; no gate, no service. The
//     ceiling of the straightforward design: about one message per fsync.
//   - Pebble alone: the service's records for one create call, committed as
//     one synced batch per request by as many writers as the executors have
//     handlers.
//   - JetStream + PostgreSQL ledger: the conventional design, on the same
//     approvals with the same handlers and no gate: one PostgreSQL
//     transaction per approval keyed by the intent id (insert if absent,
//     read the first record, compare the request digest), the receipt
//     published alone and its ack awaited, then the ack. It runs on a
//     private cluster the bench starts (initdb, a temporary directory, a
//     Unix socket; fsync and synchronous_commit on) and is skipped, with a
//     line in the report, where PostgreSQL is not installed.
//
// Every run ends with a check that nothing was lost or doubled: every
// approval has a terminal receipt, creates executed = tasks existing =
// distinct intents, one created receipt per intent, and all receipts of an
// intent name one task (the audit's checks of a run, audit.VerifyRun). A run
// that fails the check fails.
//
// It is a client of the pipeline, not a part of it: it starts executors with
// executor.Start, stores approvals with the executor's batch publisher,
// runs the task service as the provider command ("provider serve") or with
// the embedded stack, and checks with the audit. It must never change
// how an executor or the task service behaves to make a figure look better,
// and never report a figure from a run that failed its check. No package
// the pipeline runs on imports it: only the bench command (cmd/bench) does.
//
// It must never import a test rig.
package bench
