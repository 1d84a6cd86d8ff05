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
	if err != nil {
		t.Fatal(err)
	}
	r, ok := lk.(taskservice.Renewer)
	if !ok {
		t.Fatalf("the ledger's lock (%T) cannot be renewed", lk)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if err := r.Renew(ctx); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	}
	if err := lk.Held(ctx); err != nil {
		t.Fatalf("Held after 3 s of renewals of a 1 s lock: %v", err)
	}
	if _, err := l.Lock(ctx, "default", "renewed", time.Minute); !errors.Is(err, taskservice.ErrLocked) {
		t.Fatalf("another Lock of a renewed lock: %v, want ErrLocked", err)
	}
	t.Run("a lock no longer renewed runs out, and Renew then says it is lost", func(t *testing.T) {
		time.Sleep(1100 * time.Millisecond)
		if err := r.Renew(ctx); !errors.Is(err, taskservice.ErrLockLost) {
			t.Fatalf("Renew after the TTL: %v, want ErrLockLost", err)
		}
	})
}

// A renewal of a lock whose key was purged (the executor role cleaning
// up) or taken by another writes nothing and says the lock is lost.
func TestRenewOfAPurgedLockIsLost(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	lk, err := l.Lock(ctx, "default", "purged", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LockKey("default", "purged")
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
	other, err := l.Lock(ctx, "default", "purged", time.Minute)
	if err != nil {
		t.Fatalf("Lock after the purge: %v", err)
	}
	if err := lk.(taskservice.Renewer).Renew(ctx); !errors.Is(err, taskservice.ErrLockLost) {
		t.Fatalf("Renew of a purged lock: %v, want ErrLockLost", err)
	}
	if err := other.Held(ctx); err != nil {
		t.Fatalf("the new holder's lock after the old holder's Renew: %v", err)
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, found, err := l.Doubted(ctx, "default", "short")
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record of 1 s is still there after 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := l.Doubt(ctx, "default", "short", time.Minute); err != nil {
		t.Fatalf("Doubt after the record ran out: %v", err)
	}
}

func TestDoubtRefusesBadKeys(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	for _, tc := range []struct{ name, scope, intent string }{
		{"a scope starting with an underscore", "_doubt", "x"},
		{"an empty intent id", "default", ""},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			if _, err := l.Doubt(context.Background(), tc.scope, tc.intent, time.Minute); !errors.Is(err, ledger.ErrBadKey) {
				t.Fatalf("Doubt(%q, %q): %v, want ErrBadKey", tc.scope, tc.intent, err)
			}
		})
	}
}
