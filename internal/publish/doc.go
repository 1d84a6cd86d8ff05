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
// A message goes onto its key's subject, approvals.<scope>.<intent> (the
// request's scope; the default scope when it names none).
//
// Receipts waits for receipts without a JetStream consumer, so that no
// number of senders or waits can use up the RECEIPTS stream's consumers: a
// core NATS subscription on a key's receipts subject
// (receipts.<scope>.<intent>) says when a receipt is published, and the
// receipt is read back as the stream stored it with a direct get of the
// last message on that subject
// ($JS.API.DIRECT.GET.RECEIPTS.receipts.<scope>.<intent>), whose API
// subject names the subject read, so that a permission can confine a
// caller to its own scope. Those reads also find a receipt stored before
// the subscription existed or while the connection was away, and repeat
// with a bounded back-off while a wait lasts. A direct get by subject
// reads only the last receipt of a key: a receipt is reported once it is
// read stored, or once a receipt published in the same atomic batch is.
// One hidden by a later receipt of its key is found by a scan of the key's
// stored receipts with the stream's message get (next_by_subj), where the
// credentials allow it; a tenant's do not, and its wait then ends with
// ErrNoReceipt.
// One Receipts serves any number of waits (redrive waits for all of a
// run's messages on one).
//
// The package must never make up an id that another send could carry,
// never report a receipt that is not for its own message or that the
// RECEIPTS stream did not store, and never create a consumer to wait.
//
// It must never import Pebble, nats-server or a test rig.
package publish
