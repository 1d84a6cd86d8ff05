package keylife_test

import (
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/keylife"
)

func TestDeadlineIsTheApprovalsNotAfterPlusHowLongTheStreamCanStillDeliverIt(t *testing.T) {
	notAfter := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		notAfter     time.Time
		deliveryWait time.Duration
		want         time.Time
	}{
		{"an approval valid until noon on a stream that keeps messages 2h is kept until 14:00", notAfter, 2 * time.Hour, notAfter.Add(2 * time.Hour)},
		{"the default stream age of 7 days is added whole", notAfter, 7 * 24 * time.Hour, notAfter.Add(7 * 24 * time.Hour)},
		{"an unsigned approval (no not_after) is kept for ever", time.Time{}, 2 * time.Hour, time.Time{}},
		{"a stream that keeps messages for ever keeps the key for ever", notAfter, 0, time.Time{}},
		{"a negative wait is read as for ever, never as a shorter key", notAfter, -time.Hour, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := keylife.Deadline(c.notAfter, c.deliveryWait); !got.Equal(c.want) {
				t.Fatalf("Deadline(%v, %v) = %v, want %v", c.notAfter, c.deliveryWait, got, c.want)
			}
		})
	}
}
