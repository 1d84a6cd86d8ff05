// Package probe answers, by experiment, the questions that decide whether a
// task service is safe behind an at-least-once pipeline: what a second call
// with the same key and body returns, what the same key with another body
// does, what concurrent calls with one key do, whether a retry after a lost
// reply finds the first call's task, whether a key outlives its task, and in
// what scope keys are remembered.
//
// Run sends a short, bounded script of create calls to a Target through the
// public contract (package taskservice) and returns a Report: one Row per
// question, each saying how it was measured, what was seen and whether that
// is safe, unsafe or unknown, and a Verdict over the rows. The executor
// command "executor probe" prints it as a table or as JSON. The rows are
// the conformance suite's (package taskservice/servicetest, which every
// adapter's tests run): the probe measures the same rows against a live
// service, and adds the plan, the consent, the cleanup and the verdict.
//
// # What the probe must never do
//
//   - It never touches an intent id it did not make. Every call carries an
//     intent id "probe-<run id>-<row>" with a fresh random run id, and
//     Target.Delete is only ever called with such an id (Run checks the
//     prefix before each call and refuses otherwise).
//   - It never runs without consent. Run itself has no prompt; its caller
//     shows the Plan (how many calls, how many tasks, which prefix) first and
//     proceeds only when the user said so (the command requires --yes).
//   - It is bounded: the number of calls is fixed by the Plan (plus at most
//     Options.Retries retries of a call that failed transiently), and every
//     call has a deadline.
//   - It leaves the service's list as it was: at its end it deletes the
//     tasks it made (Target.Delete, counted before and after with
//     Target.Count), unless told to keep them (Options.KeepTasks); the
//     report's Cleanup says what it deleted or kept. Its calls are in a
//     scope of their own (Scope, "sendtwice-probe") with titles that start
//     "[sendtwice probe] ", so that a person and executor verify tell its
//     tasks apart from a pipeline's.
//
// # A deleted task that comes back
//
// The row "key remembered after the task is deleted" is reported as a
// caveat, not as unsafe, when a retry after the deletion creates the task
// again. At-least-once delivery is safe when no intent ever has two tasks at
// once and no resend creates a second task beside the first; a service that
// forgets a key together with its task keeps both promises: it holds at most
// one task per intent at any time. What it does not keep is the user's
// decision to delete: a late resend of the same approval (a redelivery, a
// redrive of a dead letter, a second publish) brings the task back. That is
// a limit of retention, bounded by the approval's lifetime (the gate refuses
// an approval after its not_after), and the verdict names it with its fix:
// keep the key after the task is deleted (a tombstone) for at least the
// approvals' lifetime. A service that cannot delete tasks at all states so
// (Target.NeverDeletes) and the row is answered by that statement.
// The executor probes a service whose adapter says it forgets deleted keys
// (CalDAV) as serve runs it, composed with the executors' intent ledger
// (taskservice.KeepDeletedKeys): the resend after the deletion is then
// replayed, the task marked deleted, and the row reads "yes". Every call of
// a run carries a NotAfter an hour after its start (servicetest.ApprovalLifetime), as
// an approval would, so that a ledger keeps the run's keys no longer than
// that plus its allowances.
//
// # Services with no key
//
// A Target states its class (Target.Class): a service that keeps keys, one
// with an atomic create-if-absent, or one with no key at all, whose
// adapter looks a key up and holds a per-key lock before it creates. For
// the last, two rows show what the adapter relies on and why it is needed:
// "a create seen by the next lookup" (Target.Find right after a create
// must find it; if not, retries are unsafe) and "two plain creates, one
// key" (Target.Naive, with no lookup and no lock, counted and then deleted
// again; measured for comparison and never judged: Info). For a target
// that offers neither, the rows say "not applicable" with the target's
// reason (NotApplicable), which the verdict ignores.
//
// Rows that cannot be measured for a target (no way to lose a reply, no way
// to delete) are unknown; a verdict with unknown rows and no unsafe one is
// "not proven safe", never "safe".
//
// It must never import NATS or Pebble: it reaches a task service through
// the taskservice contract alone.
package probe
