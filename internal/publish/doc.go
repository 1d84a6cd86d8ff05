// Package publish sends approved requests onto the APPROVALS stream and waits
// for the receipt of a given stream message.
//
// Each Send gets a Nats-Msg-Id of its own, so the stream de-duplicates only
// that call's own transport retries: a second Send of the same envelope is a
// real resend and reaches the task service. It must never reuse a message id
// across calls, and never report a receipt that is not for its own message.
package publish
