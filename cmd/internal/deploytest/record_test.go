package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// status and verify read the executors' record of their task service (the
// bucket sendtwice-topology, key task-service) and show the URL it names.
// Under deploy/auth provisioning alone writes it: every other role that
// tries to point it at a machine of its own is refused, and the record is
// unchanged.
func TestOnlyProvisioningWritesTheTaskServiceRecord(t *testing.T) {
	url, pw := authServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pjs, err := jetstream.New(connectAs(t, url, "provisioning", pw["provisioning"]).Conn)
	if err != nil {
		t.Fatal(err)
	}
	const real = "https://dav.example.org/alice/tasks/"
	rec := topology.TaskService{Kind: "caldav", Destinations: map[string]string{"default": real}, CalDAVUser: "alice", By: "provisioning"}
	if err := topology.RecordTaskService(ctx, pjs, true, 1, rec); err != nil {
		t.Fatalf("provisioning could not write the task service record: %v", err)
	}
	forged := `{"kind":"caldav","destinations":{"default":"https://attacker.example/alice/tasks/"},"caldav_user":"alice"}`
	for _, role := range []string{"publisher", "tenant-a", "tenant-b", "executor", "operator", "service"} {
		t.Run(role+" is refused", func(t *testing.T) {
			c := connectAs(t, url, role, pw[role])
			if a := c.try(t, msg("$KV."+topologyBucket+"."+topology.TaskServiceKey, forged)); !a.refused {
				t.Errorf("the %s writing the task service record: %s, want refused", role, a.seen())
			}
		})
	}
	got, err := topology.ReadTaskService(ctx, pjs)
	if err != nil || got.Destinations["default"] != real {
		t.Errorf("the task service record is now %+v (%v), want the collection %s", got, err, real)
	}
}
