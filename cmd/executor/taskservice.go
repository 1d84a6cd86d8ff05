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
//     does not connect to NATS only to reach a service over HTTP. Where the
//     service can say so without creating anything, reach checks that it
//     answers and accepts the login (probe and demo call it first), and
//     list reads its tasks (the demo's figures).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/demo"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// Task service kinds, the values of --task-service.
const (
	taskServiceFake   = "fake"
	taskServiceCalDAV = "caldav"
)

// caldavPasswordEnv holds the CalDAV password when --caldav-password-file
// is not given.
const caldavPasswordEnv = "CALDAV_PASSWORD"

// taskServiceKinds lists the kinds with a line of help each, in the order
// --help shows them.
var taskServiceKinds = []struct{ name, help string }{
	{taskServiceFake, "the fake task service over NATS"},
	{taskServiceCalDAV, "a CalDAV (RFC 4791) task collection: one VTODO per intent, --caldav-url"},
}

// taskServiceFlags are the flags that choose and configure the task
// service.
type taskServiceFlags struct {
	Kind string

	CalDAVURL          string
	CalDAVUser         string
	CalDAVPasswordFile string
	// calDAVPassword is read by check, after parsing, from the file or the
	// environment; never a flag value, never logged.
	calDAVPassword string

	// getenv reads the environment; tests replace it.
	getenv func(string) string
}

// taskServiceFlagsVar adds --task-service (and, per kind, its own flags) to
// fs.
func taskServiceFlagsVar(fs *flag.FlagSet) *taskServiceFlags {
	f := &taskServiceFlags{getenv: os.Getenv}
	names := make([]string, 0, len(taskServiceKinds))
	for _, k := range taskServiceKinds {
		names = append(names, k.name+": "+k.help)
	}
	fs.StringVar(&f.Kind, "task-service", taskServiceFake, "which task `SERVICE` to call; one of\n"+strings.Join(names, "\n"))
	fs.StringVar(&f.CalDAVURL, "caldav-url", "", "with --task-service caldav: the `URL` of the calendar collection that holds the tasks\n(for example https://dav.example.org/alice/tasks/)")
	fs.StringVar(&f.CalDAVUser, "caldav-user", "", "with --task-service caldav: the `USER` to log in as (HTTP basic authentication)")
	fs.StringVar(&f.CalDAVPasswordFile, "caldav-password-file", "", "with --task-service caldav: a `FILE` holding the password (default: $"+caldavPasswordEnv+")")
	return f
}

// errTaskServiceRefused is returned by serve when the task service refuses
// it before the first delivery (a wrong URL or password).
var errTaskServiceRefused = errors.New("the task service refuses this executor")

// errUnknownTaskService is wrapped by check for an unknown --task-service.
var errUnknownTaskService = errors.New("unknown task service")

// check validates the flags after parsing, and reads the CalDAV password
// from its file or the environment; its errors are usage errors.
func (f *taskServiceFlags) check() error {
	for _, k := range taskServiceKinds {
		if f.Kind == k.name {
			return f.checkKind()
		}
	}
	names := make([]string, 0, len(taskServiceKinds))
	for _, k := range taskServiceKinds {
		names = append(names, k.name)
	}
	return fmt.Errorf("%w: --task-service %q: %w; known: %s", errUsage, f.Kind, errUnknownTaskService, strings.Join(names, ", "))
}

func (f *taskServiceFlags) checkKind() error {
	caldavSet := f.CalDAVURL != "" || f.CalDAVUser != "" || f.CalDAVPasswordFile != ""
	if f.Kind != taskServiceCalDAV {
		if caldavSet {
			return fmt.Errorf("%w: --caldav-url, --caldav-user and --caldav-password-file need --task-service caldav", errUsage)
		}
		return nil
	}
	if f.CalDAVURL == "" {
		return fmt.Errorf("%w: --task-service caldav needs --caldav-url", errUsage)
	}
	if f.CalDAVPasswordFile != "" {
		b, err := os.ReadFile(f.CalDAVPasswordFile)
		if err != nil {
			return fmt.Errorf("%w: --caldav-password-file: %w", errUsage, err)
		}
		f.calDAVPassword = strings.TrimRight(string(b), "\r\n")
		if f.calDAVPassword == "" {
			return fmt.Errorf("%w: --caldav-password-file %s is empty", errUsage, f.CalDAVPasswordFile)
		}
	} else if f.getenv != nil {
		f.calDAVPassword = f.getenv(caldavPasswordEnv)
	}
	if f.calDAVPassword != "" && f.CalDAVUser == "" {
		return fmt.Errorf("%w: a CalDAV password is given (--caldav-password-file or $%s) but no --caldav-user", errUsage, caldavPasswordEnv)
	}
	// Checks the URL's form without a request.
	if _, err := caldav.New(caldav.Config{CollectionURL: f.CalDAVURL}); err != nil {
		return fmt.Errorf("%w: --caldav-url: %w", errUsage, err)
	}
	return nil
}

// needsNATS reports whether the chosen service is reached over NATS, so
// that open needs a connection.
func (f *taskServiceFlags) needsNATS() bool { return f.Kind == taskServiceFake }

// taskService is an opened task service: the Target (the Service the
// executor calls, with the adapter's statements and the probe's hooks) and
// what releases it.
type taskService struct {
	probe.Target
	// reach checks, creating nothing, that the service answers and accepts
	// the login; nil for a kind that has no such check. A command calls it
	// before its first create, so that a wrong URL or password is one clear
	// error rather than a failure of every call.
	reach func(ctx context.Context) error
	// list reads the tasks the service holds, from the service itself, for
	// the demo; nil for a kind that cannot list them.
	list  func(ctx context.Context) (demo.Listing, error)
	close func() error
}

// Reach checks that the service can be used, creating nothing; it does
// nothing for a kind without such a check.
func (s *taskService) Reach(ctx context.Context) error {
	if s == nil || s.reach == nil {
		return nil
	}
	return s.reach(ctx)
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
	case taskServiceCalDAV:
		t, a, err := caldavTarget(caldav.Config{CollectionURL: f.CalDAVURL, Username: f.CalDAVUser, Password: f.calDAVPassword}, callTimeout)
		if err != nil {
			return nil, err
		}
		return &taskService{Target: t, reach: func(ctx context.Context) error {
			// One calendar-query REPORT: it reads the collection and
			// creates nothing.
			if _, err := a.Tasks(ctx); err != nil {
				if taskservice.IsPermanent(err) {
					return fmt.Errorf("listing the collection's tasks: %w (a permanent error: check --caldav-url, --caldav-user and the password)", err)
				}
				return fmt.Errorf("listing the collection's tasks: %w", err)
			}
			return nil
		}, list: func(ctx context.Context) (demo.Listing, error) {
			l, err := a.Tasks(ctx)
			if err != nil {
				return demo.Listing{}, err
			}
			out := demo.Listing{All: l.VTODOs}
			for _, t := range l.Tasks {
				out.Tasks = append(out.Tasks, demo.ListedTask{IntentID: t.IntentID, TaskID: t.TaskID, RequestDigest: t.RequestDigest})
			}
			return out, nil
		}}, nil
	}
	return nil, fmt.Errorf("task service %q: %w", f.Kind, errUnknownTaskService)
}

// keepDeletedKeys gives a service that forgets a key when its task is
// deleted (CalDAV) the executors' intent ledger on js, so that a resend
// after its owner deleted the task is answered replayed (task deleted) and
// creates nothing (taskservice.KeepDeletedKeys). With provision it creates
// or updates the ledger's bucket with replicas (as the streams); without
// (--no-provision) it only finds it. A service that remembers deleted keys
// itself is left as it is. It returns what the ledger is, for a log line,
// or "" when none is used.
func (s *taskService) keepDeletedKeys(ctx context.Context, js jetstream.JetStream, provision bool, replicas int) (string, error) {
	if taskservice.RemembersDeletedKeys(s.Service) {
		return "", nil
	}
	if provision {
		if err := ledger.Ensure(ctx, js, replicas); err != nil {
			return "", err
		}
	}
	l, err := ledger.Open(ctx, js, ledger.Options{})
	if err != nil {
		return "", err
	}
	kept, err := taskservice.KeepDeletedKeys(s.Service, l)
	if err != nil {
		return "", err
	}
	s.Service = kept
	return "JetStream bucket " + ledger.Bucket, nil
}

// fakeTarget presents the fake task service on nc. It deletes a task as its
// owner would (the service's delete endpoint; the probe's keys are in scope
// "default", as its requests name none), and the service keeps the key;
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
		Name:    "fake task service",
		Service: c.TaskService(),
		Scope:   "each caller scope, in the service",
		Delete: func(ctx context.Context, intentID string) error {
			_, err := c.Delete(ctx, provider.DeleteRequest{IntentID: intentID})
			return err
		},
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

// caldavTarget presents a CalDAV collection. Its Service is the adapter
// alone, which forgets a key when its task is deleted: serve and probe
// compose it with the intent ledger (keepDeletedKeys). A task can be
// deleted (only one the adapter made for that intent, as its owner would); its tasks are counted from the
// collection's listing; a reply is lost by the transport, which lets the
// server answer and then drops the answer, as a broken connection would.
func caldavTarget(cfg caldav.Config, callTimeout time.Duration) (probe.Target, *caldav.Adapter, error) {
	lossy := &lossyTransport{next: http.DefaultTransport}
	cfg.HTTPClient = &http.Client{Transport: lossy, Timeout: callTimeout}
	a, err := caldav.New(cfg)
	if err != nil {
		return probe.Target{}, nil, err
	}
	return probe.Target{
		Name:         "CalDAV collection " + a.CollectionURL(),
		Service:      a,
		Scope:        a.Scope(),
		Delete:       a.Delete,
		LoseReplyHow: "the server answers the PUT; the answer is dropped before the adapter reads it",
		LoseReply: func(context.Context) (func(context.Context) error, error) {
			lossy.drop.Store(1)
			return func(context.Context) error { lossy.drop.Store(0); return nil }, nil
		},
		Count: func(ctx context.Context, intentID string) (int, error) {
			l, err := a.Tasks(ctx)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, t := range l.Tasks {
				if t.IntentID == intentID {
					n++
				}
			}
			return n, nil
		},
	}, a, nil
}

// errReplyLost is what a call whose reply was dropped on purpose returns.
var errReplyLost = errors.New("the reply was lost on purpose after the server answered")

// lossyTransport passes requests on; while drop is positive, it lets the
// server answer a PUT, then drops the answer and returns errReplyLost.
type lossyTransport struct {
	next http.RoundTripper
	drop atomic.Int64
}

func (t *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut {
		return resp, err
	}
	for {
		n := t.drop.Load()
		if n <= 0 {
			return resp, nil
		}
		if t.drop.CompareAndSwap(n, n-1) {
			resp.Body.Close()
			return nil, errReplyLost
		}
	}
}
