// Package audit reads what the pipeline left behind — the APPROVALS stream,
// the receipts, the dead letters, the task service's records and the
// executors' intent ledger — to report
// status and to check, independently of the executor, that nothing was lost
// or done twice.
//
// Verify traces every service call and every receipt back to the stored
// approval message its call reference names, re-runs the gate on that
// message, bounds each message's calls by its deliveries, compares each
// task the service created with the task of the approved request that
// created it (reporting every create the service refused for not matching
// its request), and fails a message with two terminal outcomes that
// contradict each other. It sees only what the streams still hold: its
// report states that window (the stream's first and last sequence and max
// age), and counts apart the records of messages that aged out before it.
// A record younger than the max age whose message is gone is a violation,
// not an exclusion.
//
// Every check has a stable name, kept in one registry (registry.go): a
// table of each check's name, what it asserts and the function that makes
// it. Verify, a listed service's audit and VerifyRun are lists of names
// from it, and a check's number in a report is its place in that list;
// the report carries the name (Check.ID), and a caller picks a check by
// it, never by its number. The checks live by family:
// one-terminal-outcome and rejected-not-called in outcomes.go;
// one-create-per-key and first-records-unchanged in creates.go; counters
// and requests-accounted in counters.go; calls-name-messages,
// receipts-name-messages, one-call-per-delivery and one-store in
// tracechecks.go (the window they trace into in trace.go); gate-passes in
// gaterun.go; content-as-approved in content.go; as-provisioned and
// no-foreign-records in provisioned.go; listed-one-task-per-key and
// listed-tasks-named in listed.go; listed-tasks-proven in proven.go;
// ledger-entries-approved in ledger.go
// (every entry of the executors' intent ledger stands on a stored
// approval of its key and request digest); run-not-refused, run-one-create-per-key
// and run-counters in run.go. What the checks read is loaded in input.go
// and read.go. The history of a fault run's calls (package history) and
// its linearizability (package linearize) check the same invariants from
// the calls' side, outside this package.
//
// Every check about keys keys them as the task service does: by the pair
// (scope, intent id); a record or receipt without a scope is in the
// default scope. Two scopes with one intent id and one task each are two
// keys; a receipt naming another key's task is a violation. A task its
// owner deleted is counted apart (creates executed = tasks existing +
// tasks deleted); a replay of its key says so (task_deleted), and a key
// created again after its task was deleted is a violation.
//
// The service compacts keys after their approvals expired and may retire
// request and create records after a records retention; its stats state both
// (provider.Lifetime). A key whose record is gone is outside the audit window,
// counted, once its deadline has passed: the approval's not_after plus the
// APPROVALS stream's max age as provisioned (keylife.Deadline, the rule the
// executor sends with each call) plus the service's clock allowance and margin
// (for a message no longer held, the deadline its call carried); gone before
// that, or for an approval that never expires, it is a violation. Records
// missing from a service with a retention are counted as retired when their
// calls may be older than it, and the report says what could then not be
// checked; any other missing record is a violation.
//
// It judges the streams and the consumer against what provisioning
// recorded (topology.ReadRecord), never against their current settings:
// every difference is a violation, and the window's max age and the
// delivery budget are the ones provisioned, so that lowering a MaxAge or
// raising a budget cannot steer it. It reads every stored record with a
// pull of its own, whatever the record's headers say, and reports one that
// does not decode (a status message stored through a reply subject, junk,
// another schema) with its stream and sequence; it never stops on one.
//
// VerifyRun checks one run of work instead of the whole history: the
// messages a caller stored (a window of sequences), the receipts stored for
// them from a known sequence on (ReadRunReceipts) and the service's counters
// before and after. A load run ends with it.
//
// A task service that keeps no call log and no counters (a CalDAV
// collection, a Redmine project) is audited by the tasks it lists (LoadWith
// and a taskservice.Lister): listed-one-task-per-key and listed-tasks-named take
// the place of one-create-per-key and counters, and the checks that need
// its record of every call are reported as not applicable, with the
// reason. A key with two tasks is a
// violation naming both; a task whose key no receipt names is one too,
// unless its message was dead-lettered or a tool of this project left it:
// the probe and the demo make their tasks in scopes of their own
// (sendtwice-probe, sendtwice-demo) with titles that start with their
// prefixes (Marks). A task that carries both, for a key no message or
// receipt of the audited pipeline names, is counted and listed apart; one
// without the title, or for a key the pipeline carried, is audited as the
// pipeline's, since nothing reserves those scopes. Two tasks for one key
// are a violation in those scopes too.
//
// It only reads. It must never publish, ack, or call the task service's
// create endpoint, so that running it cannot change what it measures.
//
// It must never import internal/embedded or nats-server: it reads a
// deployment and never starts one. It must never import internal/executor,
// internal/probe or cmd/internal/service: it stands apart from what it audits,
// and reads the rules it shares with them (a key's deadline:
// internal/keylife; a call reference: topology.CallRef; the tools' marks:
// taskservice/servicetest) from where those are written once.
package audit
