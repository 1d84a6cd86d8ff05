// Package linearize decides whether a recorded history of create calls to a
// task service (package history) is linearizable with respect to the
// contract of package taskservice: whether some order of the calls, each
// taking effect at one instant between its call and its return, explains
// every response seen.
//
// The model, per intent id, is the outcome table:
//
//   - absent: the call creates, answers created with a task id, and the
//     intent is bound to its request digest and that task id;
//   - bound, the same digest: replayed with the bound task id, nothing
//     changes;
//   - bound, another digest: idempotency_conflict with the bound task id,
//     nothing changes;
//   - the owner's delete of the task (a call with history.OpDelete, answered
//     history.Deleted) needs a task that exists, and marks it deleted: the
//     key stays bound, so a later call with the same digest is replayed
//     with the first task id and the deleted mark (Result.TaskDeleted), and
//     one with another digest is a conflict. A created after the delete (a
//     task made again) is not linearizable, and neither is a replay whose
//     mark disagrees with the state (unmarked after the delete, marked
//     before it). A delete without a known response may have happened or
//     not.
//
// A call without a known response (its process died, it failed with a
// transient or permanent error, its reply was lost) may or may not have
// taken effect. It is given a return time at infinity and an output that
// every state accepts: the checker may place it anywhere after its call,
// including after every other call, which is the same as never. Placed on
// an absent intent, it binds the intent to its digest with a task id not
// yet known; the first response that names the task id fixes it.
//
// Of the calls without response that one intent got with one digest, only
// the first sent is given to the checker: any effect of a later one, the
// first could have had at the same instant. This changes no verdict and
// keeps the search small where it would otherwise try every subset of
// those calls (on an intent that fails).
//
// Intents are independent, so the history is partitioned by intent id
// (porcupine's Model.Partition) and the check stays fast at tens of
// thousands of calls. That a task id belongs to one intent only is a
// property across partitions; it is checked separately, over every
// response that names a task id.
//
// The checker is github.com/anishathalye/porcupine. On a violation it names
// the intents and can write porcupine's visualisation (one HTML file) of
// them.
//
// This package works on recorded histories only: it must never import NATS,
// Pebble, internal/executor or internal/provider: nothing that reaches a
// running service.
package linearize
