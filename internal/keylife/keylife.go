package keylife

import "time"

// Deadline is the last moment at which a message carrying an approval
// that expires at notAfter can still pass the gate, given that a stored
// message can wait up to deliveryWait (the approvals stream's MaxAge) for
// a delivery. The gate judges a message's expiry at the time the stream
// stored it, so that every delivery of one message gets one verdict: a
// message stored just before notAfter may be delivered (a first delivery
// after a backlog, a redelivery) until notAfter + deliveryWait, and the
// task service must still know its key then. A resend published after
// notAfter is stored after it and refused at expiry. Zero (keep the key for
// ever) when notAfter is zero (an unsigned approval) or when the stream
// keeps messages for ever (deliveryWait 0).
func Deadline(notAfter time.Time, deliveryWait time.Duration) time.Time {
	if notAfter.IsZero() || deliveryWait <= 0 {
		return time.Time{}
	}
	return notAfter.Add(deliveryWait)
}
