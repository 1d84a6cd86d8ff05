package deploytest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// The entry the executor writes and every other role tries to change.
const ledgerScope, ledgerIntent = "default", "intent-ledger-1"

// ledgerRequest is a task request for intent in scope default, approved
// until notAfter, as the executor hands it to a task service.
func ledgerRequest(intent, title string, notAfter time.Time) taskservice.Request {
	sum := sha256.Sum256([]byte(intent + "\x00" + title))
	return taskservice.Request{
		Scope:         taskservice.DefaultScope,
		IntentID:      intent,
		RequestDigest: "sha256:" + hex.EncodeToString(sum[:]),
		RequestID:     "task-request-" + intent,
		Task:          taskservice.Task{Title: title},
		CallRef:       "APPROVALS:1:1:1",
		CandidateID:   "cand-0001",
		SourceVersion: "v1",
		ApprovedBy:    "reviewer@example.org",
		NotAfter:      notAfter,
	}
}

// testIntentLedger shows the intent ledger under deploy/auth: provisioning
// made its bucket (ledger.Ensure, as executor provision does); the
// executor opens it with its own credentials, writes, extends and reads
// entries, and keeps a task deleted on a real CalDAV server from being
// created again; every other role is refused reading, writing or deleting
// an entry and touching the bucket (but the operator opens it and reads
// entries: status and verify open it, as it holds Redmine's locks), and the
// executor's entry stays as it wrote it. The executor itself may not purge,
// delete or reconfigure the bucket.
func testIntentLedger(t *testing.T, ctx context.Context, spies *spyTables, pjs jetstream.JetStream, ex *conn, others []*conn) {
	tbl := spies.table("The executors' intent ledger",
		"The key-value bucket `sendtwice-intents`, which remembers the keys of a task service that forgets a key when its task is deleted (CalDAV)"+
			", Redmine's per-key locks and in-doubt records, and the deployment's mark key. Provisioning makes it; only the executors write its entries, which the operator reads (status and verify "+
			"open it). A role that could write or delete an entry could make the executors create a deleted task again; after every attempt the executor's entry is as it wrote it.",
		"role", "action", "subject", "seen")
	spies.add(tbl, "provisioning", "create or update the bucket (`executor provision`)", "`$JS.API.STREAM.CREATE.KV_sendtwice-intents`", seenAllowed)

	exJS, _ := jetstream.New(ex.Conn)
	// Each of the executor's own steps fails within seconds when refused.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := ledger.Open(lctx, exJS, ledger.Options{})
	if err != nil {
		t.Fatalf("the executor could not open the intent ledger: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	entry := taskservice.LedgerEntry{Scope: ledgerScope, IntentID: ledgerIntent, RequestDigest: "sha256:" + hex.EncodeToString(make([]byte, 32)),
		TaskID: "task-ledger-1", NotAfter: now.Add(time.Hour)}
	if err := l.Put(lctx, entry); err != nil {
		t.Fatalf("the executor could not write an entry: %v", err)
	}
	// A later approval extends the entry: a publish of its own, with a TTL.
	entry.NotAfter = now.Add(2 * time.Hour)
	if err := l.Put(lctx, entry); err != nil {
		t.Fatalf("the executor could not extend an entry: %v", err)
	}
	if got, found, err := l.Get(lctx, ledgerScope, ledgerIntent); err != nil || !found || got != entry {
		t.Fatalf("the executor read back %+v (found %v): %v; want %+v", got, found, err, entry)
	}
	spies.add(tbl, "executor", "open the bucket, read, write and extend an entry (`ledger.Open`, `Get`, `Put`)",
		"`$JS.API.STREAM.INFO.KV_sendtwice-intents`, `$JS.API.DIRECT.GET.KV_sendtwice-intents.>`, `$KV.sendtwice-intents.>`", seenAllowed)
	kv, err := pjs.KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.Key(ledgerScope, ledgerIntent)
	if _, err := kv.Get(ctx, key); err != nil {
		t.Fatalf("provisioning reading the executor's entry: %v", err)
	}

	t.Run("an executor serving a CalDAV collection with the ledger answers a task deleted by its owner as replayed, deleted", func(t *testing.T) {
		s := davtest.Start(t, davtest.Xandikos, davtest.Options{})
		a, err := caldav.New(caldav.Config{CollectionURL: s.CollectionURL, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		kept, err := taskservice.KeepDeletedKeys(a, l)
		if err != nil {
			t.Fatal(err)
		}
		req := ledgerRequest("intent-ledger-caldav", "deleted by its owner", now.Add(time.Hour))
		first, err := kept.Create(ctx, req)
		if err != nil || first.Outcome != taskservice.Created {
			t.Fatalf("the first call: %+v, %v; want created", first, err)
		}
		if err := a.Delete(ctx, req.IntentID); err != nil {
			t.Fatalf("deleting the task as its owner would: %v", err)
		}
		again, err := kept.Create(ctx, req)
		if err != nil || again.Outcome != taskservice.Replayed || !again.TaskDeleted || again.TaskID != first.TaskID {
			t.Fatalf("the resend after the delete: %+v, %v; want replayed %s, task deleted", again, err, first.TaskID)
		}
		name, err := caldav.ResourceName(req.IntentID)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Creates(s.ResourcePath(name)); got != 1 {
			t.Errorf("the server answered %d creates (201) for the intent, want 1", got)
		}
	})

	entrySubject := "$KV." + ledger.Bucket + "." + key
	write := msg(entrySubject, `{"scope":"default","intent_id":"intent-ledger-1","request_digest":"sha256:00","task_id":"another-task"}`)
	del, purgeKey := entryRemovals(entrySubject)
	stream := "KV_" + ledger.Bucket
	attempts := []struct {
		action string
		m      *nats.Msg
		// operatorMay: the operator's status and verify read the ledger.
		operatorMay bool
	}{
		{"write an entry (bind the key to another task)", write, false},
		{"delete an entry (a delete marker)", del, false},
		{"purge an entry (a purge marker)", purgeKey, false},
		{"read an entry (direct get)", msg("$JS.API.DIRECT.GET."+stream+"."+entrySubject, ""), true},
		{"open the bucket", msg("$JS.API.STREAM.INFO."+stream, ""), true},
		{"read the entries through a consumer of its own", msg("$JS.API.CONSUMER.CREATE."+stream+".spy",
			`{"stream_name":"`+stream+`","config":{"name":"spy","ack_policy":"none","inactive_threshold":60000000000}}`), false},
		{"purge the bucket", msg("$JS.API.STREAM.PURGE."+stream, ""), false},
		{"delete the bucket", msg("$JS.API.STREAM.DELETE."+stream, ""), false},
	}
	state := func() string { return entryState(ctx, kv, key) }
	want := state()
	unchanged := func(role, action string) bool {
		if got := state(); got != want {
			t.Errorf("the %s's attempt to %s changed the executor's entry: %s, was %s", role, action, got, want)
			want = got
			return false
		}
		return true
	}
	for _, c := range others {
		for _, at := range attempts {
			a := c.try(t, at.m)
			seen := a.seen()
			may := at.operatorMay && c.role == "operator"
			if !unchanged(c.role, at.action) {
				seen = "CHANGED the entry"
			} else if may && seen != seenAllowed {
				t.Errorf("the operator's attempt to %s on %s: %s, want allowed", at.action, at.m.Subject, seen)
			} else if !may && !a.refused {
				t.Errorf("the %s's attempt to %s on %s: %s, want refused", c.role, at.action, at.m.Subject, seen)
			}
			spies.add(tbl, c.role, at.action, "`"+at.m.Subject+"`", seen)
		}
		if c.role == "operator" {
			operatorReadsTheLedger(t, ctx, c, entry)
		}
	}
	// The executor writes entries; the bucket is provisioning's.
	for _, at := range []struct {
		action string
		m      *nats.Msg
	}{
		{"purge the bucket", msg("$JS.API.STREAM.PURGE."+stream, "")},
		{"delete an entry's message", msg("$JS.API.STREAM.MSG.DELETE."+stream, `{"seq":1}`)},
		{"change the bucket (drop its TTLs)", msg("$JS.API.STREAM.UPDATE."+stream, `{"name":"`+stream+`","subjects":["$KV.`+ledger.Bucket+`.>"]}`)},
		{"delete the bucket", msg("$JS.API.STREAM.DELETE."+stream, "")},
	} {
		a := ex.try(t, at.m)
		seen := a.seen()
		if !unchanged(ex.role, at.action) {
			seen = "CHANGED the entry"
		} else if !a.refused {
			t.Errorf("the executor's attempt to %s on %s: %s, want refused", at.action, at.m.Subject, seen)
		}
		spies.add(tbl, ex.role, at.action, "`"+at.m.Subject+"`", seen)
	}
	if st, err := kv.Status(ctx); err != nil || st.LimitMarkerTTL() <= 0 {
		t.Errorf("the bucket lost its per-key TTLs: %v", err)
	}
}

// entryRemovals are the delete and the purge of a key-value entry, as a
// client writes them on the entry's subject.
func entryRemovals(entrySubject string) (del, purge *nats.Msg) {
	del = msg(entrySubject, "")
	del.Header.Set("KV-Operation", "DEL")
	purge = msg(entrySubject, "")
	purge.Header.Set("KV-Operation", "PURGE")
	purge.Header.Set("Nats-Rollup", "sub")
	return del, purge
}

// entryState is a key-value entry as stored: its revision and value, or an
// error (none there, or no bucket).
func entryState(ctx context.Context, kv jetstream.KeyValue, key string) string {
	e, err := kv.Get(ctx, key)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("revision %d: %s", e.Revision(), e.Value())
}

// operatorReadsTheLedger opens the intent ledger as status and verify do,
// with the operator's credentials, and reads the executor's entry.
func operatorReadsTheLedger(t *testing.T, ctx context.Context, op *conn, want taskservice.LedgerEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ojs, _ := jetstream.New(op.Conn)
	l, err := ledger.Open(ctx, ojs, ledger.Options{})
	if err != nil {
		t.Fatalf("the operator could not open the intent ledger: %v", err)
	}
	if got, found, err := l.Get(ctx, want.Scope, want.IntentID); err != nil || !found || got != want {
		t.Errorf("the operator read %+v (found %v): %v; want %+v", got, found, err, want)
	}
}
