// Package redrive republishes dead-lettered approvals so that, after an
// outage, an operator can finish them: a dead letter's payload (the original
// envelope, byte for byte) is published again on the APPROVALS subject of its
// intent as a new message, through the same send as the publisher's
// (package send), and the executors carry it out like any other message.
// The task service is keyed by the intent id, so a redrive answers created
// when no earlier attempt reached the service and replayed when one did;
// it never creates a second task.
//
// Each republished message carries HeaderRedriveOf naming the dead letter's
// sequence in the DEADLETTERS stream. Redriven reads those marks back from
// the APPROVALS stream, so that a dead letter already redriven is not
// republished by accident: callers refuse or skip it unless told to force.
// The message id of a redrive is derived from the dead letter, so two
// redrives of one dead letter within the stream's duplicate window (two
// operators at once, or one publish retried) are stored once; a forced
// redrive gets an id of its own.
//
// It only reads the DEADLETTERS stream; it never deletes or changes a dead
// letter, so the record of the failure stays.
//
// Run is the executor's redrive command without its command line: it takes
// the dead letters asked for by its flags (FlagsVar), republishes them, and,
// with a wait, reports the outcome of each.
//
// It must never import internal/embedded or nats-server: it works on a
// running deployment and never starts one.
package redrive
