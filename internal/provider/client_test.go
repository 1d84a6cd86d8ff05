package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A call ends at whichever comes first, the context's deadline or the
// client's Timeout, against a service that never answers.
func TestCallEndsAtTheEarlierOfDeadlineAndTimeout(t *testing.T) {
	nc := connect(t, startNATS(t))
	silent, err := nc.Subscribe(SubjectCreate, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const short, long = 200 * time.Millisecond, time.Minute
	for _, tc := range []struct {
		name              string
		deadline, timeout time.Duration
	}{
		{"an earlier context deadline wins over the timeout", short, long},
		{"the timeout wins over a later context deadline", long, short},
		{"the timeout bounds a call whose context has no deadline", 0, short},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			c := &Client{nc: nc, Timeout: tc.timeout}
			start := time.Now()
			_, err := c.Create(ctx, newRequest("intent-unanswered", "x"))
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || !IsTransient(err) {
				t.Fatalf("error %v, want a transient deadline", err)
			}
			if took < short || took > 10*time.Second {
				t.Errorf("the call took %v, want about %v", took, short)
			}
		})
	}
}
