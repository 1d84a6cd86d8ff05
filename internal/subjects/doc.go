// Package subjects names the pipeline's NATS subjects for an intent id:
// approvals.<token>, receipts.<token> and deadletters.<token>, where the
// token is the intent id itself when it is a safe subject token, else a
// hash of it.
//
// It is only the naming, so that the gate can compare a delivery's subject
// with the one its intent must use without importing anything of NATS.
// It must never import anything but the standard library; the streams and
// the consumer that use these subjects are package topology's.
package subjects
