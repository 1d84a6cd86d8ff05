// Package redrive republishes dead-lettered approvals so that, after an
// outage, an operator can finish them: a dead letter's payload (the original
// envelope, byte for byte) is published again on the APPROVALS subject of its
// intent as a new message, through the same send as the publisher's
// (package send), and the executors carry it out like any other message.
// The task service is keyed by the intent id, so a redrive answers created
// when no earlier attempt reached the service and replayed when one did;
// it never creates a second task.
//
// Which dead letters were redriven is recorded in the key-value bucket
// Bucket (Records), which provisioning makes and, under deploy/auth, only
// the operator writes: callers refuse or skip a dead letter recorded as
// redriven unless told to force. Nothing a publisher can write is
// believed: each republished message carries HeaderRedriveOf for the
// executors' logs, but Records alone says what was redriven, and each
// redrive's message id is 128 random bits (NewMsgID), so that no publisher
// can store a message under it first and have the redrive taken for a
// duplicate. Redrive publishes before it records; a crash in between
// leaves the dead letter to be redriven again, which the task service
// answers replayed.
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
