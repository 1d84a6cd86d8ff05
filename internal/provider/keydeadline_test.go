package provider

import (
	"errors"
	"testing"
	"time"
)

// TestACallForANewKeyWhoseDeadlineHasPassedIsRefused: a key the service
// does not know, whose deadline (not_after + allowance + margin) has
// passed by the service's clock, would be compacted at once, and a resend
// could create again: the call is refused, recorded, and creates nothing.
// A key the service knows is replayed whatever its deadline.
func TestACallForANewKeyWhoseDeadlineHasPassedIsRefused(t *testing.T) {
	clock := newTestClock()
	allowance, margin := 5*time.Minute, time.Hour
	st := openStore(t, t.TempDir(), Options{Clock: clock.Now, KeyClockAllowance: allowance, KeyMargin: margin, CompactEvery: -1})
	ctx := ctxT(t)
	known := clock.Now().Add(10 * time.Minute)
	first, err := st.Create(ctx, expiring("team-a", "intent-known", known))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10*time.Minute + allowance + margin + time.Second)

	t.Run("a new key whose not_after plus allowance and margin lies in the past is refused at key_deadline", func(t *testing.T) {
		late := clock.Now().Add(-allowance - margin - time.Second)
		_, err := st.Create(ctx, expiring("team-a", "intent-late", late))
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || re.Refusal.Check != CheckKeyDeadline || re.Refusal.Field != "not_after" {
			t.Fatalf("err %v; want a refusal at %s, not_after", err, CheckKeyDeadline)
		}
		if _, ok := keyOf(t, st, "team-a", "intent-late"); ok {
			t.Error("the refused call left a key")
		}
		if st.Stats() != counts(2, 1, 1) {
			t.Errorf("counts %+v; want 2 requests, 1 create, 1 task", st.Stats())
		}
	})
	t.Run("a new key whose deadline is exactly now is still created", func(t *testing.T) {
		edge := clock.Now().Add(-allowance - margin)
		got, err := st.Create(ctx, expiring("team-a", "intent-edge", edge))
		if err != nil || got.Outcome != OutcomeCreated {
			t.Fatalf("%+v, %v; want created", got, err)
		}
	})
	t.Run("a known key past its deadline, not yet compacted, is replayed", func(t *testing.T) {
		got, err := st.Create(ctx, expiring("team-a", "intent-known", known))
		if err != nil || got.Outcome != OutcomeReplayed || got.TaskID != first.TaskID {
			t.Fatalf("%+v, %v; want replayed %s", got, err, first.TaskID)
		}
	})
	t.Run("a key without a deadline is created whatever the clock", func(t *testing.T) {
		clock.Advance(24 * 365 * time.Hour)
		got, err := st.Create(ctx, expiring("team-a", "intent-forever", time.Time{}))
		if err != nil || got.Outcome != OutcomeCreated {
			t.Fatalf("%+v, %v; want created", got, err)
		}
	})
}
