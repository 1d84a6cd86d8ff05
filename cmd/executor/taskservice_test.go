package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestTaskServiceFlags(t *testing.T) {
	parseTS := func(t *testing.T, args ...string) *taskServiceFlags {
		t.Helper()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ts := taskServiceFlagsVar(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	t.Run("the fake task service over NATS is the default", func(t *testing.T) {
		ts := parseTS(t)
		if ts.Kind != taskServiceFake || ts.check() != nil || !ts.needsNATS() {
			t.Errorf("default: kind %q, check %v, needs NATS %v", ts.Kind, ts.check(), ts.needsNATS())
		}
	})
	t.Run("an unknown service is a usage error that lists the known ones", func(t *testing.T) {
		err := parseTS(t, "--task-service", "exchange").check()
		if !errors.Is(err, errUsage) || !errors.Is(err, errUnknownTaskService) {
			t.Errorf("check: %v, want a usage error wrapping errUnknownTaskService", err)
		}
	})
	t.Run("opening the fake connects once and passes a failure to connect on", func(t *testing.T) {
		calls := 0
		refused := errors.New("refused")
		_, err := parseTS(t).open(context.Background(), func() (*nats.Conn, error) {
			calls++
			return nil, refused
		}, time.Second)
		if calls != 1 || !errors.Is(err, refused) {
			t.Errorf("open: %d connects, error %v; want 1 and the connect error", calls, err)
		}
	})
}
