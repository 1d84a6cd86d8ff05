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
	"github.com/sendtwice/sendtwice/internal/topology"
)

// testRedriveRecord shows the record of redrives (bucket sendtwice-redrives,
// made by provisioning) under deploy/auth: the operator writes an entry, as
// its redrive does; every other role is refused writing, deleting or
// purging it and opening the bucket, a tenant's ack aimed at it is not
// stored, and the entry stays as the operator wrote it. A role that could
// write it could make redrive skip another tenant's dead letter.
func testRedriveRecord(t *testing.T, ctx context.Context, spies *spyTables, pjs jetstream.JetStream, op *conn, others []*conn) {
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
	state := func() string { return entryState(ctx, kv, key) }
	want := state()
	entrySubject := "$KV." + redrive.Bucket + "." + key
	del, purge := entryRemovals(entrySubject)
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
	// One row for every role but the operator (the operator's own job is
	// in its redrive row): refused unless an attempt got through.
	seen := seenRefused
	for _, c := range others {
		for _, at := range attempts {
			a := c.try(t, at.m)
			if got := state(); got != want {
				t.Errorf("the %s's attempt to %s changed the record: %s, was %s", c.role, at.action, got, want)
				seen, want = fmt.Sprintf("CHANGED the record (the %s's %s)", c.role, at.action), got
			} else if !a.refused {
				t.Errorf("the %s's attempt to %s on %s: %s, want refused", c.role, at.action, at.m.Subject, a.seen())
				seen = fmt.Sprintf("the %s's %s: %s", c.role, at.action, a.seen())
			}
		}
	}
	// A tenant's own approval, with the entry's subject as its reply: the
	// stream's ack goes to the tenant's account, never into the bucket.
	tenant := others[1]
	if err := tenant.PublishMsg(&nats.Msg{Subject: subjects.Approval(tenant.role, "spy"), Reply: entrySubject, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	_ = tenant.Flush()
	if _, err := kv.Get(ctx, "2"); err == nil {
		t.Errorf("an entry 2 appeared in the record")
	}
	if got := state(); got != want {
		t.Errorf("the %s's approval with the record's subject as reply changed the record: %s, was %s", tenant.role, got, want)
		seen = "CHANGED the record (a reply)"
	}
	spies.add(spies.table("What each role did", ""), "publisher, tenants, executor, service",
		"write, delete or purge an entry of the record of redrives, open its bucket, or name an entry as the reply of an approval",
		"`$KV.sendtwice-redrives.>`, `$JS.API.STREAM.INFO.KV_sendtwice-redrives`", seen)
}

func TestTheOperatorsRedriveWithoutTheRecordsBucketSaysToProvisionIt(t *testing.T) {
	url, pw := authServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pjs, _ := jetstream.New(connectAs(t, url, "provisioning", pw["provisioning"]).Conn)
	if _, err := topology.SetUp(ctx, pjs, topology.Config{}, topology.SetUpOptions{}); err != nil {
		t.Fatal(err)
	}
	ojs, _ := jetstream.New(connectAs(t, url, "operator", pw["operator"]).Conn)
	start := time.Now()
	_, err := redrive.OpenRecords(ctx, ojs, true)
	if want := "redrive: no bucket " + redrive.Bucket + ", and making it failed (run executor provision"; err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("opening the record without its bucket: %v; want a refusal that says to run executor provision", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the refusal took %v; want it within seconds, not the command's whole --timeout", took)
	}
}
