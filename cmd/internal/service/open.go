package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// Service is an opened task service.
type Service struct {
	// Name names the service ("CalDAV collection https://…/").
	Name string
	// Service is what the executor calls: the adapter, or a router over
	// several destinations; KeepDeletedKeys composes it with the intent
	// ledger.
	Service taskservice.Service
	// Scope says in what scope the service remembers keys, as the adapter
	// states it.
	Scope string
	// Adapter is the adapter of the destination the probe and the demo
	// use (Provider, Destination): default, or else the first one given.
	// Its optional abilities (taskservice.Lister, taskservice.Deleter,
	// taskservice.Finder) are found by type assertion.
	Adapter taskservice.Service
	// Provider and Destination name that destination.
	Provider, Destination string
	// Serves lists the (provider, destination) pairs the service serves:
	// the gate's Checker.Serves. Where says, for each, where its tasks are
	// made, for serve's log.
	Serves []gate.Destination
	Where  []string
	// Lister lists the tasks of every destination, for verify and status,
	// for a kind that keeps no call log; nil for the fake service, which
	// verify reads over NATS.
	Lister taskservice.Lister
	// LoseReply arranges that the reply to the next create is lost after
	// the service acted on it; disarm undoes it if no create used it up.
	// Nil unless the Config asked for it (LoseReplies).
	LoseReply func(ctx context.Context) (disarm func(context.Context) error, err error)

	stated stated
	// reach checks, creating nothing, that the service answers and accepts
	// the login; nil for a kind that has no such check.
	reach func(ctx context.Context) error
	// ledger is the intent ledger Open took for a kind that keeps its
	// locks there; KeepDeletedKeys composes the service with the same one.
	ledger *ledger.Ledger
	// oneTaskPerKey, for a service of several CalDAV destinations, wraps
	// its router so that a key has one task across them
	// (executor.Router.OneTaskPerKey); KeepDeletedKeys applies it with the
	// ledger it opens. Nil otherwise.
	oneTaskPerKey func(locks taskservice.Locker) (taskservice.Service, error)
}

// stated is what the adapter states about its service, for the probe's
// table.
type stated struct {
	// class states how the service keeps a resend to one task.
	class string
	// naiveWhyNot and findWhyNot say why there is no naive create or no
	// lookup that decides a create; empty when there is.
	naiveWhyNot, findWhyNot string
	// loseReplyHow says how a reply is lost.
	loseReplyHow string
}

// The classes of task service, as the probe states them.
const (
	ClassKeepsKeys = "keeps keys"
	ClassAtomic    = "atomic create-if-absent"
	ClassNoKey     = "no key: the adapter looks up and locks"
)

// Reach checks that the service can be used, creating nothing; it does
// nothing for a kind without such a check. A command calls it before its
// first create, so that a wrong URL or password is one clear error rather
// than a failure of every call.
func (s *Service) Reach(ctx context.Context) error {
	if s == nil || s.reach == nil {
		return nil
	}
	return s.reach(ctx)
}

// Target is the service as the probe measures it: its Service, and what
// its adapter offers (a delete, a listing to count by, a naive create, a
// lookup that decides a create) and states.
func (s *Service) Target() probe.Target {
	t := probe.Target{Target: servicetest.Target{Name: s.Name, Service: s.Service, Scope: s.Scope, Class: s.stated.class,
		NaiveWhyNot: s.stated.naiveWhyNot, FindWhyNot: s.stated.findWhyNot, LoseReply: s.LoseReply, LoseReplyHow: s.stated.loseReplyHow},
		Provider: s.Provider, Destination: s.Destination}
	if d, ok := s.Adapter.(taskservice.Deleter); ok {
		t.Delete = d.DeleteTask
	}
	switch a := s.Adapter.(type) {
	case *fakeAdapter:
		t.Count = a.countProbeTasks
	case taskservice.Lister:
		t.Count = servicetest.CountListed(a)
	}
	if n, ok := s.Adapter.(interface{ Naive() taskservice.Service }); ok {
		t.Naive = n.Naive()
	}
	if f, ok := s.Adapter.(taskservice.Finder); ok && s.stated.findWhyNot == "" {
		t.Find = f.Find
	}
	return t
}

// Open opens the chosen service. connect is called only for a service
// reached over NATS; a connection it returns stays the caller's. Each call
// to the service takes at most callTimeout.
func (f *Config) Open(ctx context.Context, connect func() (*nats.Conn, error), callTimeout time.Duration) (*Service, error) {
	switch f.Kind {
	case KindFake:
		nc, err := connect()
		if err != nil {
			return nil, err
		}
		return f.openFake(nc, callTimeout), nil
	case KindCalDAV:
		return f.openCalDAV(ctx, callTimeout)
	case KindRedmine:
		return f.openRedmine(ctx, connect, callTimeout)
	}
	return nil, fmt.Errorf("task service %q: %w", f.Kind, ErrUnknown)
}

// OpenToList opens the service on nc to list its tasks (verify, status),
// each call taking at most callTimeout, with the deployment's mark key when
// there is one, so that a task without its proof is listed as unproven.
// Listing takes no lock: a --redmine-lock-ttl or --redmine-request-lifetime
// given as to serve is not its business.
func (f *Config) OpenToList(ctx context.Context, nc *nats.Conn, callTimeout time.Duration) (*Service, error) {
	f.RedmineLockTTL, f.RedmineRequestLifetime = 0, 0
	if f.NeedsLedger() {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		if err := f.TakeMarkKey(ctx, js, false); err != nil {
			return nil, err
		}
	}
	return f.Open(ctx, func() (*nats.Conn, error) { return nc, nil }, callTimeout)
}

// KeepDeletedKeys gives a service that forgets a key when its task is
// deleted (CalDAV) the executors' intent ledger on js, so that a resend
// after its owner deleted the task is answered replayed (task deleted) and
// creates nothing (taskservice.KeepDeletedKeys). With provision it creates
// or updates the ledger's bucket with replicas (as the streams); without
// (--no-provision) it only finds it. A service that remembers deleted keys
// itself is left as it is. Several CalDAV destinations also take their
// per-key locks in the same ledger (oneTaskPerKey), applied first. It
// returns what the ledger is, for a log line, or "" when none is used.
func (s *Service) KeepDeletedKeys(ctx context.Context, js jetstream.JetStream, provision bool, replicas int) (string, error) {
	if taskservice.RemembersDeletedKeys(s.Service) {
		return "", nil
	}
	if s.ledger != nil {
		// Open took it already, for the locks.
		kept, err := taskservice.KeepDeletedKeys(s.Service, s.ledger)
		if err != nil {
			return "", err
		}
		s.Service = kept
		return "JetStream bucket " + ledger.Bucket + " (keys of deleted tasks and per-key locks)", nil
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
	svc, what := s.Service, "JetStream bucket "+ledger.Bucket
	if s.oneTaskPerKey != nil {
		// Several destinations: a key's lock in the same ledger keeps
		// one task per key across them.
		if svc, err = s.oneTaskPerKey(l); err != nil {
			return "", err
		}
		what += " (keys of deleted tasks and per-key locks across destinations)"
	}
	kept, err := taskservice.KeepDeletedKeys(svc, l)
	if err != nil {
		return "", err
	}
	s.Service = kept
	return what, nil
}

// fakeAdapter is the fake task service's client with the abilities the
// probe and the demo use: it deletes a task as its owner would (the
// service's delete endpoint, by the key's scope and intent id), and the
// service keeps the key; it counts the probe's tasks from its own records.
type fakeAdapter struct {
	taskservice.Service
	c *provider.Client
}

func (a *fakeAdapter) DeleteTask(ctx context.Context, scope, intentID string) error {
	_, err := a.c.Delete(ctx, provider.DeleteRequest{Scope: scope, IntentID: intentID})
	return err
}

// countProbeTasks counts the tasks of intentID in the probe's scope, where
// its keys are.
func (a *fakeAdapter) countProbeTasks(ctx context.Context, intentID string) (int, error) {
	n := 0
	req := provider.RecordsRequest{Kind: provider.RecordTasks, Scope: probe.Scope, IntentID: intentID, Limit: provider.MaxRecordsLimit}
	for {
		page, err := a.c.Records(ctx, req)
		if err != nil {
			return 0, err
		}
		n += len(page.Tasks)
		if page.NextSeq == 0 {
			return n, nil
		}
		req.AfterSeq = page.NextSeq
	}
}

// openFake presents the fake task service on nc. Its lost reply (asked for
// by LoseReplies) is the service's fault switch, which exists only on a
// service started with faults allowed (tests, demos, probe --embedded).
// The switch drops the reply of the next create the service takes,
// whoever sends it: should another caller's create come first, that caller
// sees a timeout and retries (a replay), and the probe, whose reply then
// arrives, reports the row as not measured.
func (f *Config) openFake(nc *nats.Conn, callTimeout time.Duration) *Service {
	c := provider.NewClient(nc)
	c.Timeout = callTimeout
	s := &Service{Name: "fake task service", Service: c.TaskService(), Scope: "each caller scope, in the service",
		Adapter:  &fakeAdapter{Service: c.TaskService(), c: c},
		Provider: document.ProviderFake, Destination: document.DefaultDestination,
		Serves: []gate.Destination{executor.FakeDefault}, Where: []string{executor.FakeDefault.String() + " at the fake task service over NATS"},
		stated: stated{class: ClassKeepsKeys, naiveWhyNot: "the service keeps the key itself: every create it takes is keyed",
			findWhyNot: "the service decides a create by its key in one step; no lookup precedes it", loseReplyHow: "the service withholds the reply after commit"}}
	if f.LoseReplies {
		s.LoseReply = func(ctx context.Context) (func(context.Context) error, error) {
			if _, err := c.ArmFault(ctx, 1); err != nil {
				return nil, fmt.Errorf("the fake task service has no fault switch (it runs without faults allowed; probe --embedded has one): %w", err)
			}
			return func(ctx context.Context) error {
				_, err := c.ArmFault(ctx, 0)
				return err
			}, nil
		}
	}
	return s
}

// openRedmine opens a Redmine project. Its adapter forgets a key when its
// issue is deleted: serve and probe compose it with the intent ledger
// (KeepDeletedKeys), which Open takes through connect, as it also holds
// the adapter's per-key locks. The adapter offers a delete, a listing, a
// naive create (no lookup, no lock) and a lookup, for the probe's rows
// that show why its protocol is needed and what it relies on.
func (f *Config) openRedmine(ctx context.Context, connect func() (*nats.Conn, error), callTimeout time.Duration) (*Service, error) {
	// The lock TTL against the call timeout is checked by the commands
	// that create (serve, probe: CheckCallTimeout), before they open
	// anything; verify only lists.
	nc, err := connect()
	if err != nil {
		return nil, err
	}
	l, err := f.redmineLedger(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("opening the intent ledger for Redmine's locks: %w", err)
	}
	cfg := f.redmineConfig(l, callTimeout)
	s := &Service{stated: stated{class: ClassNoKey, loseReplyHow: "Redmine answers the POST; the answer is dropped before the adapter reads it"}}
	cfg.HTTPClient = &http.Client{Transport: s.faults(f, http.MethodPost, boundedTransport(redmine.DefaultMaxConns)), Timeout: callTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a, err := redmine.New(cfg)
	if err != nil {
		return nil, err
	}
	dest := gate.Destination{Provider: document.ProviderRedmine, Name: document.DefaultDestination}
	s.Name = "Redmine project " + a.Project() + " at " + a.URL()
	s.Service, s.Adapter, s.Scope, s.Lister, s.ledger = a, a, a.Scope(), a, l
	s.Provider, s.Destination = dest.Provider, dest.Name
	s.Serves, s.Where = []gate.Destination{dest}, []string{dest.String() + " at " + s.Name}
	s.reach = func(ctx context.Context) error {
		// GETs only: the login, the project, the custom field.
		err := a.Check(ctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, redmine.ErrNoField):
			// The adapter's error says how an administrator makes it.
			return fmt.Errorf("checking Redmine: the issues cannot carry their key, so no issue is created without it (--redmine-field %q): %w", a.Field(), err)
		case taskservice.IsPermanent(err):
			return fmt.Errorf("checking Redmine: %w (a permanent error: check --redmine-url, --redmine-project and the API key)", err)
		default:
			return fmt.Errorf("checking Redmine: %w", err)
		}
	}
	return s, nil
}

// redmineLedger opens the intent ledger on nc for Redmine's locks,
// creating or updating its bucket first when the Config may
// (ProvisionLedger).
func (f *Config) redmineLedger(ctx context.Context, nc *nats.Conn) (*ledger.Ledger, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if f.ProvisionLedger {
		if err := ledger.Ensure(ctx, js, max(f.LedgerReplicas, 1)); err != nil {
			return nil, err
		}
	}
	return ledger.Open(ctx, js, ledger.Options{})
}
