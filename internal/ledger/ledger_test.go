package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
	"github.com/sendtwice/sendtwice/taskservice"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// awaitGone polls found until it says false, failing after within.
func awaitGone(t *testing.T, what string, within time.Duration, found func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		f, err := found()
		if err != nil {
			t.Fatal(err)
		}
		if !f {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there after %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ttlOf reads the TTL header of the key's latest message.
func ttlOf(t *testing.T, js jetstream.JetStream, scope, intent string) string {
	t.Helper()
	ctx := context.Background()
	key, err := ledger.Key(scope, intent)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "$KV."+ledger.Bucket+"."+key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get(jetstream.MsgTTLHeader)
}

func TestPutAndGet(t *testing.T) {
	js := testenv.JetStream(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := testenv.Ledger(t, js, ledger.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	notAfter := now.Add(10 * time.Minute)

	tests := []struct {
		name      string
		put       taskservice.LedgerEntry
		want      taskservice.LedgerEntry
		wantTTL   string
		wantFound bool
	}{
		{"a new entry is read back with a TTL of not_after plus the allowance and the margin",
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: notAfter},
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: notAfter},
			(10*time.Minute + ledger.DefaultClockAllowance + ledger.DefaultMargin).String(), true},
		{"a later approval extends the entry and keeps its binding",
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestB, TaskID: "t2", NotAfter: notAfter.Add(time.Hour)},
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: notAfter.Add(time.Hour)},
			(70*time.Minute + ledger.DefaultClockAllowance + ledger.DefaultMargin).String(), true},
		{"an earlier approval changes nothing",
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: notAfter},
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: notAfter.Add(time.Hour)},
			(70*time.Minute + ledger.DefaultClockAllowance + ledger.DefaultMargin).String(), true},
		{"an approval without not_after keeps the entry forever",
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1"},
			taskservice.LedgerEntry{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1"},
			"", true},
		{"an intent id that is no KV key is kept under its hash",
			taskservice.LedgerEntry{Scope: "default", IntentID: "team/a b.ü", RequestDigest: digestA, TaskID: "t3"},
			taskservice.LedgerEntry{Scope: "default", IntentID: "team/a b.ü", RequestDigest: digestA, TaskID: "t3"},
			"", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.Put(ctx, tt.put); err != nil {
				t.Fatal(err)
			}
			got, found, err := l.Get(ctx, tt.put.Scope, tt.put.IntentID)
			if err != nil || found != tt.wantFound {
				t.Fatalf("Get: found %v, %v; want found %v", found, err, tt.wantFound)
			}
			if !got.NotAfter.Equal(tt.want.NotAfter) {
				t.Errorf("not_after %v, want %v", got.NotAfter, tt.want.NotAfter)
			}
			got.NotAfter, tt.want.NotAfter = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("entry %+v, want %+v", got, tt.want)
			}
			if ttl := ttlOf(t, js, tt.put.Scope, tt.put.IntentID); ttl != tt.wantTTL {
				t.Errorf("TTL header %q, want %q", ttl, tt.wantTTL)
			}
		})
	}
	t.Run("the same intent id in another scope is another entry", func(t *testing.T) {
		if _, found, err := l.Get(ctx, "team-b", "intent-1"); err != nil || found {
			t.Errorf("found %v, %v; want nothing", found, err)
		}
	})
}

func TestBadInputIsRefused(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		e    taskservice.LedgerEntry
		want error
	}{
		{"a scope that is not one subject token", taskservice.LedgerEntry{Scope: "team.a", IntentID: "i", RequestDigest: digestA, TaskID: "t"}, ledger.ErrBadKey},
		{"an empty scope", taskservice.LedgerEntry{IntentID: "i", RequestDigest: digestA, TaskID: "t"}, ledger.ErrBadKey},
		{"an empty intent id", taskservice.LedgerEntry{Scope: "a", RequestDigest: digestA, TaskID: "t"}, ledger.ErrBadKey},
		{"an entry without a task id", taskservice.LedgerEntry{Scope: "a", IntentID: "i", RequestDigest: digestA}, ledger.ErrBadEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused and writes nothing", func(t *testing.T) {
			if err := l.Put(ctx, tt.e); !errors.Is(err, tt.want) {
				t.Errorf("Put: %v, want %v", err, tt.want)
			}
		})
	}
	st, err := js.Stream(ctx, "KV_"+ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("the bucket holds %d messages after refused writes; want 0", info.State.Msgs)
	}
}

func TestAnEntryWhoseTTLPassedIsGone(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{ClockAllowance: -1, Margin: time.Second})
	ctx := context.Background()
	e := taskservice.LedgerEntry{Scope: "default", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: time.Now()}
	if err := l.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if ttl := ttlOf(t, js, "default", "intent-1"); ttl != "1s" {
		t.Fatalf("TTL %q, want 1s", ttl)
	}
	awaitGone(t, "the entry of 1 s", 20*time.Second, func() (bool, error) {
		_, found, err := l.Get(ctx, "default", "intent-1")
		return found, err
	})
	// The key is free again: a new entry is written (over the marker).
	e.TaskID = "t2"
	e.NotAfter = time.Now().Add(time.Hour)
	if err := l.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got, found, _ := l.Get(ctx, "default", "intent-1"); !found || got.TaskID != "t2" {
		t.Errorf("after expiry, a new entry reads %+v (found %v); want task t2", got, found)
	}
}

func TestOpenWithoutTheBucketSaysHowToProvisionIt(t *testing.T) {
	js := testenv.JetStream(t)
	_, err := ledger.Open(context.Background(), js, ledger.Options{})
	if !errors.Is(err, ledger.ErrNoBucket) || !strings.Contains(err.Error(), "provision") {
		t.Errorf("Open without a bucket: %v; want ErrNoBucket saying how to provision it", err)
	}
}

func TestBucketIsReplicatedAsAsked(t *testing.T) {
	if got := ledger.BucketConfig(3).Replicas; got != 3 {
		t.Errorf("replicas %d, want 3", got)
	}
	if got := ledger.BucketConfig(0).Replicas; got != 1 {
		t.Errorf("replicas of 0: %d, want 1", got)
	}
	if ledger.BucketConfig(1).LimitMarkerTTL <= 0 {
		t.Error("the bucket has no limit-marker TTL: per-key TTLs would be refused")
	}
}

func TestLockIsExclusive(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
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
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
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

func TestAPurgedLockIsLostToHeldAndRenew(t *testing.T) {
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
	t.Run("a renewal finds it lost and leaves the next holder's lock as it is", func(t *testing.T) {
		other, err := l.Lock(ctx, "default", "gone", time.Minute)
		if err != nil {
			t.Fatalf("Lock after the purge: %v", err)
		}
		if err := lk.(taskservice.Renewer).Renew(ctx); !errors.Is(err, taskservice.ErrLockLost) {
			t.Fatalf("Renew of a purged lock: %v, want ErrLockLost", err)
		}
		if err := other.Held(ctx); err != nil {
			t.Fatalf("the next holder's lock after the old holder's Renew: %v", err)
		}
	})
}

func TestLocksAndDoubtsRefuseBadKeys(t *testing.T) {
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	ctx := context.Background()
	for _, tc := range []struct{ name, scope, intent string }{
		{"a scope starting with an underscore", "_lock", "x"},
		{"an empty scope", "", "x"},
		{"an upper-case scope", "Team", "x"},
		{"an empty intent id", "default", ""},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, lerr := l.Lock(ctx, tc.scope, tc.intent, time.Minute)
			_, derr := l.Doubt(ctx, tc.scope, tc.intent, time.Minute)
			if !errors.Is(lerr, ledger.ErrBadKey) || !errors.Is(derr, ledger.ErrBadKey) {
				t.Fatalf("(%q, %q): Lock %v, Doubt %v; want ErrBadKey", tc.scope, tc.intent, lerr, derr)
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

func TestEachLedgerOperationIsASpanOfTheCallersTraceNamingItsKey(t *testing.T) {
	rec := tracingtest.Record(t)
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{})
	const scope, intent = "team-a", "intent-traced"
	entry := taskservice.LedgerEntry{Scope: scope, IntentID: intent, RequestDigest: digestA, TaskID: "t1", NotAfter: time.Now().Add(time.Hour)}
	badScope := entry
	badScope.Scope = "Bad Scope"
	var (
		get     = func(ctx context.Context) error { _, _, err := l.Get(ctx, scope, intent); return err }
		put     = func(ctx context.Context) error { return l.Put(ctx, entry) }
		putBad  = func(ctx context.Context) error { return l.Put(ctx, badScope) }
		lock    = func(ctx context.Context) error { _, err := l.Lock(ctx, scope, intent, time.Minute); return err }
		doubt   = func(ctx context.Context) error { _, err := l.Doubt(ctx, scope, intent, time.Minute); return err }
		doubted = func(ctx context.Context) error { _, _, err := l.Doubted(ctx, scope, intent); return err }
		settle  = func(ctx context.Context) error { return l.Settle(ctx, scope, intent) }
	)
	for _, tc := range []struct {
		name, span, scope string
		run               func(context.Context) error
		want              error
	}{
		{"a look-up of a key without an entry", "ledger get", scope, get, nil},
		{"a put", "ledger put", scope, put, nil},
		{"a lock taken", "ledger lock", scope, lock, nil},
		{"a lock held by another fails", "ledger lock", scope, lock, taskservice.ErrLocked},
		{"an in-doubt record written", "ledger doubt", scope, doubt, nil},
		{"an in-doubt record already there fails", "ledger doubt", scope, doubt, taskservice.ErrInDoubt},
		{"an in-doubt record read", "ledger doubted", scope, doubted, nil},
		{"an in-doubt record settled", "ledger settle", scope, settle, nil},
		{"a put with a bad scope fails", "ledger put", badScope.Scope, putBad, ledger.ErrBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			ctx, caller := tracing.Tracer().Start(context.Background(), "caller")
			err := tc.run(ctx)
			caller.End()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var spans []string
			for _, s := range rec.Ended() {
				if s.Parent().SpanID() != caller.SpanContext().SpanID() {
					continue
				}
				spans = append(spans, s.Name())
				if err := tracingtest.Check(s, tracing.Scope.String(tc.scope), tracing.IntentID.String(intent)); err != nil {
					t.Error(err)
				}
				if desc, failed := tracingtest.Failed(s); failed != (err != nil) || (failed && desc != err.Error()) {
					t.Errorf("span %q: status %v %q, want failed %v with the error", s.Name(), failed, desc, err != nil)
				}
			}
			if len(spans) != 1 || spans[0] != tc.span {
				t.Fatalf("the caller's child spans: %q, want one %q", spans, tc.span)
			}
		})
	}
}
