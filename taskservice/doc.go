// Package taskservice is the contract between the executor and a task
// service: create this task for this intent id, with this request digest
// and the approved request document it was computed over → created,
// replayed or idempotency_conflict with the task id, or an error that is
// transient (retry the delivery later) or permanent (dead-letter it, with
// the reason).
//
// The executor reaches every task service through Service and nothing else.
// The fake task service over NATS is one implementation (in the provider
// package of this module); the CalDAV adapter (package
// taskservice/caldav) and the Redmine adapter (package taskservice/redmine)
// are two more. A user connects their own system by
// writing a type with one method, Create, that keeps the contract below.
//
// # The contract
//
// For one intent id, a Service behaves as one careful clerk handling one
// call at a time:
//
//   - the first call creates one task and answers Created with its id;
//   - a later call with the same request digest creates nothing and answers
//     Replayed with the first task's id;
//   - a later call with another digest creates and changes nothing and
//     answers Conflict with the id of the task that holds the key (and, when
//     there is more to say, why in Result.Reason).
//
// The call carries the request document (Request.Request) beside the task
// taken from it. A service that does not trust its callers recomputes the
// digest from the document and creates only the task it holds, refusing a
// call whose task, intent id or digest does not match it (the fake task
// service does, so that a client with create rights cannot put a task of
// its own under an approved digest); an adapter that keeps only the digest
// may ignore it.
//
// A call that fails returns an error. Wrap it with Transient when a later
// retry of the same call may succeed (a timeout, a 5xx, a lost connection:
// such a call may or may not have taken effect, and the retry will say
// which), and with Permanent when retrying cannot help (the collection does
// not exist, the credentials are refused). An error that is neither is
// treated as transient: retrying an idempotent call is always safe, and the
// executor's delivery budget bounds it.
//
// The executor's dead letter of a permanent refusal says that resending
// the approval will be refused the same way until the cause the error
// names is fixed; only a call that kept failing transiently ends in one
// that says "the task may or may not have been created; sending again is
// safe". When the service knows that a permanent refusal created nothing
// for the request (its server refused the create, or the key's place holds
// something that is not this request's task), it marks the error
// Permanent(NotCreated(err)), and the dead letter says so too.
//
// # Keys after a deleted task
//
// A key is the pair (Request.Scope, Request.IntentID); an empty scope is
// DefaultScope. The contract asks that a key outlive its task: a resend
// after the task's owner deleted it answers Replayed with the first task's
// id and Result.TaskDeleted, and creates nothing again. A service that
// keeps such a tombstone needs nothing more. An adapter whose service
// forgets a key together with its task (a CalDAV resource: a PUT with
// If-None-Match: * succeeds again after a DELETE) says so by implementing
// DeletedKeys (RemembersDeletedKeys false) and offers a lookup that creates
// nothing (Finder). KeepDeletedKeys then composes it with a Ledger, a
// store of the keys kept by the callers (the executors keep one on
// JetStream): consulted before a create, written after every created or
// replayed answer, each entry kept as long as the latest approval seen
// for its key can still be delivered. The one case it cannot cover is a
// task deleted between the service's create and the ledger write,
// followed by a resend: the ledger never learned the key, and the task is
// created again. The write follows the create's answer at once, so the
// window is that short unless the answer is lost (a broken connection, a
// killed executor): then it lasts until the redelivery, whose answer
// writes the ledger.
//
// The package depends on the standard library alone, so that an adapter
// written against it needs nothing of NATS or of the pipeline.
package taskservice
