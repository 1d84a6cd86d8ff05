package deploytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/subjects"
)

// testRedriveRecord shows the record of redrives under deploy/auth: the
// operator writes an entry, as its redrive does; every other role is
// refused writing, deleting or purging it and opening the bucket, also
// with the entry's subject as the reply of a publish of its own, and the
// entry stays as the operator wrote it. A role that could write it could
// make redrive skip another tenant's dead letter.
func testRedriveRecord(t *testing.T, ctx context.Context, spies *spyTables, pjs jetstream.JetStream, op *conn, others []*conn) {
	tbl := spies.table("Which dead letters were redriven",
		"The key-value bucket `sendtwice-redrives`, which records each dead letter `executor redrive` republished. "+
			"Provisioning makes it; only the operator reads and writes it. A role that could write an entry could make redrive "+
			"skip another tenant's dead letter; after every attempt the operator's entry is as it wrote it.",
		"role", "action", "subject", "seen")
	spies.add(tbl, "provisioning", "create or update the bucket (`executor provision`)", "`$JS.API.STREAM.CREATE.KV_sendtwice-redrives`", seenAllowed)
	spies.add(tbl, "operator", "open the bucket, read and write an entry (`executor redrive`)",
		"`$JS.API.STREAM.INFO.KV_sendtwice-redrives`, `$JS.API.DIRECT.GET.KV_sendtwice-redrives.>`, `$KV.sendtwice-redrives.>`", seenAllowed)
	// The operator records dead letter 9000 redriven, as its redrive does.
	ojs, _ := jetstream.New(op.Conn)
	recs, err := redrive.OpenRecords(ctx, ojs, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.Add(ctx, &redrive.DeadLetter{Seq: 9000, Stored: time.Now().UTC()}, 1); err != nil {
		t.Fatalf("the operator could not record a redrive: %v", err)
	}
	kv, err := pjs.KeyValue(ctx, redrive.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	const key = "9000"
	state := func() string {
		e, err := kv.Get(ctx, key)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("revision %d: %s", e.Revision(), e.Value())
	}
	want := state()
	entrySubject := "$KV." + redrive.Bucket + "." + key
	del := msg(entrySubject, "")
	del.Header.Set("KV-Operation", "DEL")
	purge := msg(entrySubject, "")
	purge.Header.Set("KV-Operation", "PURGE")
	purge.Header.Set("Nats-Rollup", "sub")
	stream := "KV_" + redrive.Bucket
	attempts := []struct {
		action string
		m      *nats.Msg
	}{
		{"write an entry (mark a dead letter redriven)", msg("$KV."+redrive.Bucket+".2", `{"redriven_as":[1]}`)},
		{"delete an entry", del},
		{"purge an entry", purge},
		{"open the bucket", msg("$JS.API.STREAM.INFO."+stream, "")},
	}
	for _, c := range others {
		for _, at := range attempts {
			a := c.try(t, at.m)
			seen := a.seen()
			if got := state(); got != want {
				t.Errorf("the %s's attempt to %s changed the record: %s, was %s", c.role, at.action, got, want)
				seen, want = "CHANGED the record", got
			} else if !a.refused {
				t.Errorf("the %s's attempt to %s on %s: %s, want refused", c.role, at.action, at.m.Subject, seen)
			}
			spies.add(tbl, c.role, at.action, "`"+at.m.Subject+"`", seen)
		}
	}
	// A tenant's own approval, with the entry's subject as its reply: the
	// stream's ack goes to the tenant's account, never into the bucket.
	tenant := others[1]
	since := tenant.mark()
	if err := tenant.PublishMsg(&nats.Msg{Subject: subjects.Approval(tenant.role, "spy"), Reply: entrySubject, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	_ = tenant.Flush()
	seen := seenUnchanged
	if tenant.violation(since, "Publish") {
		seen = seenRefused
	}
	if _, err := kv.Get(ctx, "2"); err == nil {
		t.Errorf("an entry 2 appeared in the record")
	}
	if got := state(); got != want {
		t.Errorf("the %s's approval with the record's subject as reply changed the record: %s, was %s", tenant.role, got, want)
		seen = "CHANGED the record"
	}
	spies.add(tbl, tenant.role, "publish an approval of its own scope with an entry's subject as the reply", "`"+subjects.Approval(tenant.role, "spy")+"`, reply `"+entrySubject+"`", seen)
}
