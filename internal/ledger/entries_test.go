package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

func TestEntriesListsEveryEntryButTheLocksAndSaysWhichValueIsNoEntryOfItsKey(t *testing.T) {
	js := testenv.JetStream(t)
	l := testenv.Ledger(t, js, ledger.Options{})
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	for _, e := range []taskservice.LedgerEntry{
		{Scope: "team-a", IntentID: "intent-1", RequestDigest: digestA, TaskID: "t1", NotAfter: time.Now().Add(time.Hour)},
		{Scope: "default", IntentID: "team/a b.ü", RequestDigest: digestB, TaskID: "t2"},
	} {
		if err := l.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Lock(ctx, "team-a", "intent-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Doubt(ctx, "team-a", "intent-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	// Values written past the ledger: one naming another key, one not JSON.
	if _, err := kv.Put(ctx, "team-a.intent-2", []byte(`{"scope":"team-a","intent_id":"intent-3","request_digest":"`+digestA+`","task_id":"t3"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "team-a.intent-4", []byte("junk")); err != nil {
		t.Fatal(err)
	}

	got, err := ledger.Entries(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	hashed, _ := ledger.Key("default", "team/a b.ü")
	want := []struct{ key, digest, bad string }{
		{hashed, digestB, ""},
		{"team-a.intent-1", digestA, ""},
		{"team-a.intent-2", digestA, `it names scope "team-a" and intent id "intent-3", not its key`},
		{"team-a.intent-4", "", "not an entry: invalid character"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Key != w.key || g.Entry.RequestDigest != w.digest || !strings.HasPrefix(g.Bad, w.bad) || (w.bad == "") != (g.Bad == "") {
			t.Errorf("entry %d is %s %q (bad %q), want %s %q (bad %q)", i, g.Key, g.Entry.RequestDigest, g.Bad, w.key, w.digest, w.bad)
		}
		if g.Revision == 0 || g.Written.Before(before) || g.Written.After(time.Now()) {
			t.Errorf("entry %s: revision %d written %s", g.Key, g.Revision, g.Written)
		}
	}
	if got[1].Entry.TaskID != "t1" || got[1].Entry.NotAfter.IsZero() {
		t.Errorf("entry %s reads %+v", got[1].Key, got[1].Entry)
	}
}

func TestEntriesWithoutTheBucketIsErrNoBucket(t *testing.T) {
	_, err := ledger.Entries(context.Background(), testenv.JetStream(t))
	if !errors.Is(err, ledger.ErrNoBucket) {
		t.Fatalf("err %v, want ErrNoBucket", err)
	}
}
