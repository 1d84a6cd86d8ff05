// Package audit reads what the pipeline left behind — the APPROVALS stream,
// the receipts, the dead letters and the task service's records — to report
// status and to check, independently of the executor, that nothing was lost
// or done twice.
//
// It only reads. It must never publish, ack, or call the task service's
// create endpoint, so that running it cannot change what it measures.
package audit
