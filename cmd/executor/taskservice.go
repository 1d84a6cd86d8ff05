package main

// This file is the one place where a command chooses and opens a task
// service from its flags. A command adds the flags with taskServiceFlagsVar,
// checks them after parsing with check, and opens the service with open; it
// then sees only a probe.Target (the taskservice.Service and what the
// adapter states and offers about it) and a close function.
//
// Adding a kind (for example caldav) is three steps, all in this file:
//   - a constant and its line in taskServiceKinds;
//   - its flags in taskServiceFlagsVar (--caldav-url, --caldav-user,
//     --caldav-password-file) and their checks in check: flags of one kind
//     are refused with another kind; the password is read after parsing,
//     from the file or else from $CALDAV_PASSWORD (through a getenv field
//     that tests replace, as cli.ConnFlagsEnv does), never from a flag value
//     and never logged;
//   - a case in open that builds the adapter (from its own package) and
//     returns its Target; needsNATS says false for it, so that a command
//     does not connect to NATS only to reach a service over HTTP.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// Task service kinds, the values of --task-service.
const (
	taskServiceFake = "fake"
)

// taskServiceKinds lists the kinds with a line of help each, in the order
// --help shows them.
var taskServiceKinds = []struct{ name, help string }{
	{taskServiceFake, "the fake task service over NATS"},
}

// taskServiceFlags are the flags that choose and configure the task
// service.
type taskServiceFlags struct {
	Kind string
}

// taskServiceFlagsVar adds --task-service (and, per kind, its own flags) to
// fs.
func taskServiceFlagsVar(fs *flag.FlagSet) *taskServiceFlags {
	f := &taskServiceFlags{}
	names := make([]string, 0, len(taskServiceKinds))
	for _, k := range taskServiceKinds {
		names = append(names, k.name+": "+k.help)
	}
	fs.StringVar(&f.Kind, "task-service", taskServiceFake, "which task `SERVICE` to call; one of\n"+strings.Join(names, "\n"))
	return f
}

// errUnknownTaskService is wrapped by check for an unknown --task-service.
var errUnknownTaskService = errors.New("unknown task service")

// check validates the flags after parsing; its errors are usage errors.
func (f *taskServiceFlags) check() error {
	for _, k := range taskServiceKinds {
		if f.Kind == k.name {
			return nil
		}
	}
	names := make([]string, 0, len(taskServiceKinds))
	for _, k := range taskServiceKinds {
		names = append(names, k.name)
	}
	return fmt.Errorf("%w: --task-service %q: %w; known: %s", errUsage, f.Kind, errUnknownTaskService, strings.Join(names, ", "))
}

// needsNATS reports whether the chosen service is reached over NATS, so
// that open needs a connection.
func (f *taskServiceFlags) needsNATS() bool { return f.Kind == taskServiceFake }

// taskService is an opened task service: the Target (the Service the
// executor calls, with the adapter's statements and the probe's hooks) and
// what releases it.
type taskService struct {
	probe.Target
	close func() error
}

// Close releases what open took.
func (s *taskService) Close() error {
	if s == nil || s.close == nil {
		return nil
	}
	return s.close()
}

// open opens the chosen service. connect is called only for a service
// reached over NATS; a connection it returns stays the caller's. Each call
// to the service takes at most callTimeout.
func (f *taskServiceFlags) open(_ context.Context, connect func() (*nats.Conn, error), callTimeout time.Duration) (*taskService, error) {
	switch f.Kind {
	case taskServiceFake:
		nc, err := connect()
		if err != nil {
			return nil, err
		}
		return &taskService{Target: fakeTarget(nc, callTimeout)}, nil
	}
	return nil, fmt.Errorf("task service %q: %w", f.Kind, errUnknownTaskService)
}

// fakeTarget presents the fake task service on nc. It never deletes a task;
// its lost reply is the service's fault switch, which exists only on a
// service started with faults allowed (tests, demos, probe --embedded); its
// tasks are counted from its own records. The switch drops the reply of the
// next create the service takes, whoever sends it: should another caller's
// create come first, that caller sees a timeout and retries (a replay), and
// the probe, whose reply then arrives, reports the row as not measured.
func fakeTarget(nc *nats.Conn, callTimeout time.Duration) probe.Target {
	c := provider.NewClient(nc)
	c.Timeout = callTimeout
	return probe.Target{
		Name:         "fake task service",
		Service:      c.TaskService(),
		Scope:        "the service",
		NeverDeletes: true,
		LoseReplyHow: "the service withholds the reply after commit",
		LoseReply: func(ctx context.Context) (func(context.Context) error, error) {
			if _, err := c.ArmFault(ctx, 1); err != nil {
				return nil, fmt.Errorf("the fake task service has no fault switch (it runs without faults allowed; probe --embedded has one): %w", err)
			}
			return func(ctx context.Context) error {
				_, err := c.ArmFault(ctx, 0)
				return err
			}, nil
		},
		Count: func(ctx context.Context, intentID string) (int, error) {
			n := 0
			req := provider.RecordsRequest{Kind: provider.RecordTasks, IntentID: intentID, Limit: provider.MaxRecordsLimit}
			for {
				page, err := c.Records(ctx, req)
				if err != nil {
					return 0, err
				}
				n += len(page.Tasks)
				if page.NextSeq == 0 {
					return n, nil
				}
				req.AfterSeq = page.NextSeq
			}
		},
	}
}
