// Package publish sends approved requests onto the APPROVALS stream and waits
// for the receipt of a given stream message.
//
// Each Send gets a Nats-Msg-Id of its own, so the stream de-duplicates only
// that call's own transport retries: a second Send of the same envelope is a
// real resend and reaches the task service. SendWithID and SendWithHeaders
// take the caller's id for a caller that retries one send itself (across a
// reconnect, a server restart); such a caller passes one id to the retries
// of one send and a new one (NewMsgID) to every other send. The package
// must never make up an id that another send could carry, and never report
// a receipt that is not for its own message.
package publish
