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

func TestLockIsExclusive(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()

	first, err := l.Lock(ctx, "team-a", "intent 1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second Lock of the key is refused with ErrLocked", func(t *testing.T) {
		_, err := l.Lock(ctx, "team-a", "intent 1", time.Minute)
		if !errors.Is(err, taskservice.ErrLocked) {
			t.Fatalf("second Lock: %v, want ErrLocked", err)
		}
	})
	t.Run("another scope's lock of the same intent is another lock", func(t *testing.T) {
		other, err := l.Lock(ctx, "team-b", "intent 1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the holder's lock is held", func(t *testing.T) {
		if err := first.Held(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("after Release the key can be locked again", func(t *testing.T) {
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := first.Held(ctx); !errors.Is(err, taskservice.ErrLockLost) {
			t.Fatalf("Held after Release: %v, want ErrLockLost", err)
		}
		again, err := l.Lock(ctx, "team-a", "intent 1", time.Minute)
		if err != nil {
			t.Fatalf("Lock after Release: %v", err)
		}
		if err := again.Held(ctx); err != nil {
			t.Fatal(err)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the lock's key is not an entry of the ledger", func(t *testing.T) {
		if _, found, err := l.Get(ctx, "team-a", "intent 1"); err != nil || found {
			t.Fatalf("Get: found %v, %v; want nothing", found, err)
		}
	})
}

func TestLockExpires(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()

	first, err := l.Lock(ctx, "default", "slow", time.Millisecond) // rounded up to 1 s
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the server to remove the key (its TTL, then its expiry run).
	var second taskservice.Lock
	deadline := time.Now().Add(30 * time.Second)
	for {
		second, err = l.Lock(ctx, "default", "slow", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, taskservice.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("Lock after the first one's TTL: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Run("the first holder's Held says ErrLockLost", func(t *testing.T) {
		if err := first.Held(ctx); !errors.Is(err, taskservice.ErrLockLost) {
			t.Fatalf("Held: %v, want ErrLockLost", err)
		}
	})
	t.Run("the first holder's Release is no error and leaves the second's lock", func(t *testing.T) {
		if err := first.Release(ctx); err != nil {
			t.Fatalf("Release of a lost lock: %v", err)
		}
		if err := second.Held(ctx); err != nil {
			t.Fatalf("the second holder's lock after the first's Release: %v", err)
		}
		if _, err := l.Lock(ctx, "default", "slow", time.Minute); !errors.Is(err, taskservice.ErrLocked) {
			t.Fatalf("a third Lock: %v, want ErrLocked", err)
		}
	})
}

func TestLockHeldSeesTheKeyGone(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	lk, err := l.Lock(ctx, "default", "gone", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LockKey("default", "gone")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := lk.Held(ctx); !errors.Is(err, taskservice.ErrLockLost) {
		t.Fatalf("Held with the key purged: %v, want ErrLockLost", err)
	}
}

func TestLockRefusesBadKeys(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	for _, tc := range []struct{ name, scope, intent string }{
		{"a scope starting with an underscore", "_lock", "x"},
		{"an empty scope", "", "x"},
		{"an upper-case scope", "Team", "x"},
		{"an empty intent id", "default", ""},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := l.Lock(context.Background(), tc.scope, tc.intent, time.Minute)
			if !errors.Is(err, ledger.ErrBadKey) {
				t.Fatalf("Lock(%q, %q): %v, want ErrBadKey", tc.scope, tc.intent, err)
			}
		})
	}
}

func TestLockTTLRoundsUpToWholeSeconds(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{70 * time.Second, 70 * time.Second},
	} {
		if got := ledger.LockTTL(tc.in); got != tc.want {
			t.Errorf("LockTTL(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
