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
	"github.com/sendtwice/sendtwice/taskservice"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

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
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, found, err := l.Get(ctx, "default", "intent-1")
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry is still there long after its TTL")
		}
		time.Sleep(200 * time.Millisecond)
	}
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
