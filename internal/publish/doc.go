// Package publish sends approved requests onto the APPROVALS stream and waits
// for the receipt of a given stream message.
//
// Each Send gets a Nats-Msg-Id of its own, so the stream de-duplicates only
// that call's own transport retries: a second Send of the same envelope is a
// real resend and reaches the task service. SendWithID and SendWithHeaders
// take the caller's id for a caller that retries one send itself (across a
// reconnect, a server restart); such a caller passes one id to the retries
// of one send and a new one (NewMsgID) to every other send.
//
// Receipts waits for receipts without a JetStream consumer, so that no
// number of senders or waits can use up the RECEIPTS stream's consumers: a
// core NATS subscription on an intent's receipts subject says when a
// receipt is published, and the receipt is read back as the stream stored
// it with the message get API ($JS.API.STREAM.MSG.GET.RECEIPTS,
// next_by_subj). Those reads also find a receipt stored before the
// subscription existed or while the connection was away, and repeat with a
// bounded back-off while a wait lasts. One Receipts serves any number of
// waits (redrive waits for all of a run's messages on one).
//
// The package must never make up an id that another send could carry,
// never report a receipt that is not for its own message or that the
// RECEIPTS stream did not store, and never create a consumer to wait.
package publish
