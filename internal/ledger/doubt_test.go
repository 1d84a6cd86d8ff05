package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

// A lock of 1 s renewed every 300 ms is still its holder's after 3 s, and
// nobody else can take it; once the holder stops renewing, it runs out.
func TestRenewKeepsALockPastItsTTL(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	ctx := context.Background()
	lk, err := l.Lock(ctx, "default", "renewed", time.Second)
	r, renews := lk.(taskservice.Renewer)
	if err != nil || !renews {
		t.Fatalf("Lock: %T, %v; want a lock that can be renewed", lk, err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if err := r.Renew(ctx); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	}
	_, other := l.Lock(ctx, "default", "renewed", time.Minute)
	if held := lk.Held(ctx); held != nil || !errors.Is(other, taskservice.ErrLocked) {
		t.Fatalf("after 3 s of renewals of a 1 s lock: Held %v, another Lock %v; want it held and ErrLocked", held, other)
	}
	time.Sleep(1100 * time.Millisecond) // no longer renewed: it runs out
	if err := r.Renew(ctx); !errors.Is(err, taskservice.ErrLockLost) {
		t.Fatalf("Renew after the TTL: %v, want ErrLockLost", err)
	}
}

func TestDoubtRecords(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	ctx := context.Background()
	if _, found, err := l.Doubted(ctx, "default", "call-1"); found || err != nil {
		t.Fatalf("Doubted before any call: %v, %v", found, err)
	}
	before := time.Now()
	d, err := l.Doubt(ctx, "default", "call-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d.Started.Before(before.Add(-time.Second)) || d.Until.Sub(d.Started) != time.Minute {
		t.Fatalf("Doubt: %+v, want started now and in doubt for 1m", d)
	}
	t.Run("Doubted reads the record", func(t *testing.T) {
		got, found, err := l.Doubted(ctx, "default", "call-1")
		if err != nil || !found || !got.Until.Equal(d.Until) || !got.Started.Equal(d.Started) {
			t.Fatalf("Doubted: %+v, %v, %v; want %+v", got, found, err, d)
		}
	})
	t.Run("a second Doubt writes nothing and returns the first record", func(t *testing.T) {
		got, err := l.Doubt(ctx, "default", "call-1", time.Hour)
		if !errors.Is(err, taskservice.ErrInDoubt) || !got.Until.Equal(d.Until) {
			t.Fatalf("second Doubt: %+v, %v; want the first record and ErrInDoubt", got, err)
		}
	})
	t.Run("another scope's record of the same intent is another record", func(t *testing.T) {
		if _, found, err := l.Doubted(ctx, "team-b", "call-1"); found || err != nil {
			t.Fatalf("Doubted in another scope: %v, %v", found, err)
		}
	})
	t.Run("the record is neither an entry nor a lock", func(t *testing.T) {
		if _, found, err := l.Get(ctx, "default", "call-1"); found || err != nil {
			t.Fatalf("Get: %v, %v", found, err)
		}
		lk, err := l.Lock(ctx, "default", "call-1", time.Minute)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		_ = lk.Release(ctx)
	})
	t.Run("Settle removes it, and settling again is no error", func(t *testing.T) {
		for range 2 {
			if err := l.Settle(ctx, "default", "call-1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, found, err := l.Doubted(ctx, "default", "call-1"); found || err != nil {
			t.Fatalf("Doubted after Settle: %v, %v", found, err)
		}
		if _, err := l.Doubt(ctx, "default", "call-1", time.Minute); err != nil {
			t.Fatalf("Doubt after Settle: %v", err)
		}
	})
}

// A record lives for its lifetime, counted by the server, and no longer.
func TestADoubtRecordEndsWithItsLifetime(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	ctx := context.Background()
	if _, err := l.Doubt(ctx, "default", "short", time.Second); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, "the record of 1 s", 5*time.Second, func() (bool, error) {
		_, found, err := l.Doubted(ctx, "default", "short")
		return found, err
	})
	if _, err := l.Doubt(ctx, "default", "short", time.Minute); err != nil {
		t.Fatalf("Doubt after the record ran out: %v", err)
	}
}
