// Package executor consumes approved requests from the APPROVALS stream and,
// for each delivery, in this order: parses it strictly and runs the gate,
// calls the task service (through the taskservice contract: the fake task
// service over NATS, a CalDAV collection or a Redmine project over HTTP)
// keyed by the request's scope and intent id (with the approval's not_after, which bounds how long the service must
// keep the key, and the request document itself, in the canonical form the
// gate hashed, so that the service can check that the task it creates is
// the approved one), publishes a task-receipt.v1 (naming the key's scope,
// and whether a replayed task was deleted) and waits for the stream's ack,
// and only then acks the message. A crash anywhere in that line leads to a redelivery, which the
// service answers as replayed: never a second task.
//
// It must never call the task service for a message the gate refused, never
// ack a message before its receipt is stored, never reach the service but through
// Config.TaskService, and never drop a message silently: a message that keeps failing ends in
// the dead-letter stream with a dead_lettered receipt. The executors, not the
// server, own the end of a message's life: the consumer never gives up on a
// message, and a delivery past the budget (topology.Config.MaxDeliver) is
// dead-lettered before anything else is done with it. A dead letter's reason
// ends with what it means for the task: when its outcome is unknown
// (deliveries or retries ran out), that it may or may not have been created
// and a resend is safe and will say which; when the service refused the call
// for good (taskservice.Permanent, and NotCreated when it knows it created
// nothing), that a resend will be refused the same way until the cause is
// fixed; when the service held the key in doubt, that a resend creates no
// second task but may be held in doubt the same way.
//
// A call the service refuses because an earlier call for the key may still
// land (taskservice.InDoubt, with the time until which it may) is no
// failure: the executor stores an in_doubt receipt saying until when
// (decided_after), which ends nothing, and gives the message back to be
// delivered after that time (with jitter, at most the consumer's
// MaxNakDelay). Such deliveries, up to MaxInDoubtDeliveries of one message,
// are left out of its budget; past them an answer in doubt counts as any
// transient failure, so that a service in doubt for ever still ends the
// message, in a dead letter that says so. Each delivery stores at most one
// receipt. What the service says about an answer (taskservice.Result's
// Reason) is the receipt's note.
//
// It must never give one message two different outcomes: before a dead
// letter, and before handling a redelivery, it looks up the receipt an
// earlier delivery may have stored (its ack lost). A message with a stored
// receipt is acked or terminated, never dead-lettered; a stored refusal or
// dead letter is not followed by a call; a stored answer of the service is
// not followed by a refusal. A look-up that fails gives the delivery back.
//
// It must never consume from a consumer that differs from what provisioning
// recorded (topology.ReadRecord): a consumer rewritten by anyone else would
// decide, unseen, which approvals it is given and how often it may try. It
// compares the two at start and every Config.ConsumerCheckInterval, and on a
// difference refuses to start, or stops taking deliveries and returns the
// difference from Run.
//
// It must never import internal/provider: it reaches every task service,
// the fake one included, only through the taskservice contract
// (Config.TaskService). Each call carries the request's provider and
// destination; an executor serving several destinations gives the calls a
// Router, which sends each to its destination's service. The gate's
// destination check (Config.Gate.Serves, the fake task service's default
// destination when unset) refuses a request for any other before the call,
// and the router refuses such a call again, permanently. A key has one
// task across a router's destinations: Router.OneTaskPerKey takes the
// key's lock (in the intent ledger) and looks the key up in every other
// destination before a create, each destination's service deciding only
// its own store.
//
// Each delivery is one consumer span, "process APPROVALS" (package
// tracing; with tracing off nothing records and nothing is built for it).
// Its parent is the trace context the message carries, so that every
// delivery of a message is a span of its own in the sender's trace; it
// links to that publish span and ends with the delivery's outcome (a
// receipt's, or OutcomeRetry for a delivery given back). Its children are
// the receipt lookup of a redelivery, the gate (naming the check that
// refused), the task service create (whose context the service is handed),
// the receipt store (from the receipt joining its batch until it is
// stored) and the ack. The receipt names the trace (trace_id), its message
// carries the consumer span's trace context, and the delivery's log lines
// are made with the span's context.
package executor
