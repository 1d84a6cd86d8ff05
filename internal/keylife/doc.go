// Package keylife holds the rule for how long the task service must keep a
// key (scope, intent id): Deadline, the last moment at which a message
// carrying an approval can still pass the gate. The executor sends it with
// every call (the not_after the service keeps the key until, with its clock
// allowance and margin); the audit reads it to tell a key compacted on time
// from one forgotten too early. Both read it here, so that they cannot
// disagree.
//
// It must never import anything but the standard library.
package keylife
