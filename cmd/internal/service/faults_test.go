package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// serve's calls pass through no fault transport: only a Config that asks
// for lost replies (the probe, the demo, tests) gets a Service that can
// lose one.
func TestAFaultTransportOnlyWhereAsked(t *testing.T) {
	for _, lose := range []bool{false, true} {
		ts := parseCalDAVFlags(t, "--task-service", "caldav", "--caldav-url", "http://127.0.0.1:1/tasks/")
		if err := ts.Check(); err != nil {
			t.Fatal(err)
		}
		ts.LoseReplies = lose
		svc, err := ts.Open(context.Background(), func() (*nats.Conn, error) { return nil, errors.New("no NATS here") }, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if (svc.LoseReply != nil) != lose || (svc.Target().LoseReply != nil) != lose {
			t.Errorf("LoseReplies %v: the service can lose a reply: %v", lose, svc.LoseReply != nil)
		}
	}
}
