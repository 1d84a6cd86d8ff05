package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// openCalDAV opens the CalDAV destinations: one adapter per collection,
// all of them on ONE bounded transport (at most caldav.DefaultMaxConns
// connections to a server at once, however many of its calendars are
// served), trusting the roots of --caldav-ca-file as well. A destination
// given by --caldav-calendar is found on its server first. The Service is
// a router that sends each call to its destination's adapter (with more
// than one destination, KeepDeletedKeys keeps a key to one task across
// them: oneTaskPerKey); the Adapter is the destination the probe and the
// demo use: default, or else the first one given; the Lister (verify's)
// holds every destination's tasks. Each adapter's Service forgets a key
// when its task is deleted: serve and probe compose it with the intent
// ledger (KeepDeletedKeys).
func (f *Config) openCalDAV(ctx context.Context, callTimeout time.Duration) (*Service, error) {
	s := &Service{stated: stated{class: ClassAtomic,
		naiveWhyNot:  "every create is a PUT with If-None-Match: *, which the server refuses for a name it holds",
		findWhyNot:   "the server's create-if-absent decides a create; no lookup precedes it",
		loseReplyHow: "the server answers the PUT; the answer is dropped before the adapter reads it"}}
	client := &http.Client{Transport: s.faults(f, http.MethodPut, f.caldavTransport()), Timeout: callTimeout}
	var (
		routes   []executor.Route
		adapters []*caldav.Adapter
		use      int
	)
	for i, d := range f.caldavDests {
		a, err := f.openCollection(ctx, d, client, callTimeout)
		if err != nil {
			return nil, err
		}
		f.caldavDests[i].collection = a.CollectionURL()
		dest := gate.Destination{Provider: document.ProviderCalDAV, Name: d.Name}
		routes = append(routes, executor.Route{Destination: dest, Service: a})
		adapters = append(adapters, a)
		s.Where = append(s.Where, dest.String()+" at "+a.CollectionURL())
		if d.Name == document.DefaultDestination {
			use = i
		}
	}
	router, err := executor.NewRouter(routes...)
	if err != nil {
		return nil, err
	}
	a := adapters[use]
	s.Name, s.Service, s.Adapter, s.Scope = "CalDAV collection "+a.CollectionURL(), router, a, a.Scope()
	s.Provider, s.Destination, s.Serves = document.ProviderCalDAV, f.caldavDests[use].Name, router.Serves()
	s.Lister = collections(append([]*caldav.Adapter{a}, append(adapters[:use:use], adapters[use+1:]...)...))
	s.reach = func(ctx context.Context) error {
		// Every destination is checked, so that a wrong URL in one is
		// named even when another's check fails transiently; the joined
		// error is permanent when any part is.
		var errs []error
		for i, a := range adapters {
			if err := reachCalDAV(ctx, a); err != nil {
				errs = append(errs, fmt.Errorf("destination %s (%s): %w", f.caldavDests[i].Name, f.caldavDests[i].from, err))
			}
		}
		return errors.Join(errs...)
	}
	if len(adapters) > 1 {
		s.Name += " (destination " + s.Destination + ")"
		// Each collection decides a create for itself; across them the
		// key's lock in the intent ledger does, with Redmine's lifetime.
		s.oneTaskPerKey = func(locks taskservice.Locker) (taskservice.Service, error) {
			return router.OneTaskPerKey(locks, 2*callTimeout+10*time.Second)
		}
	}
	return s, nil
}

// openCollection opens the adapter of one destination, finding its
// calendar on the server first when it is given by name.
func (f *Config) openCollection(ctx context.Context, d caldavDest, client *http.Client, callTimeout time.Duration) (*caldav.Adapter, error) {
	cfg := caldav.Config{CollectionURL: d.URL, Username: f.CalDAVUser, Password: f.calDAVPassword, HTTPClient: client, MarkKey: f.markKey}
	if d.calendar != "" {
		fctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
		cal, err := caldav.FindCalendar(fctx, cfg, d.calendar)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("finding the calendar %q on %s (--caldav-calendar): %w", d.calendar, d.URL, err)
		}
		cfg.CollectionURL = cal.URL
	}
	a, err := caldav.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.from, err)
	}
	return a, nil
}

// reachCalDAV checks one collection, creating nothing: that it is a
// calendar that accepts tasks (the adapter's Check), then one
// calendar-query REPORT that reads it.
func reachCalDAV(ctx context.Context, a *caldav.Adapter) error {
	if err := a.Check(ctx); err != nil {
		if errors.Is(err, caldav.ErrNotTaskCalendar) && !taskservice.IsPermanent(err) {
			err = taskservice.Permanent(err)
		}
		if taskservice.IsPermanent(err) {
			return fmt.Errorf("checking the collection %s: %w (a permanent error: check --caldav-url, --destination, --caldav-user and the password)", a.CollectionURL(), err)
		}
		return fmt.Errorf("checking the collection %s: %w", a.CollectionURL(), err)
	}
	if _, err := a.Tasks(ctx); err != nil {
		if taskservice.IsPermanent(err) {
			return fmt.Errorf("listing the collection's tasks: %w (a permanent error: check --caldav-url, --destination, --caldav-user and the password)", err)
		}
		return fmt.Errorf("listing the collection's tasks: %w", err)
	}
	return nil
}

// collections lists CalDAV collections to verify as one service: the
// first, and those of the executors' other destinations, whose stores are
// audited with it (a key has one task across all of them).
type collections []*caldav.Adapter

func (cs collections) ListTasks(ctx context.Context) (taskservice.Listing, error) {
	out, err := cs[0].ListTasks(ctx)
	if err != nil {
		return taskservice.Listing{}, err
	}
	if len(cs) > 1 {
		out.Name = "CalDAV collections " + cs[0].CollectionURL()
	}
	for _, a := range cs[1:] {
		l, err := a.ListTasks(ctx)
		if err != nil {
			return taskservice.Listing{}, err
		}
		out.Name += ", " + a.CollectionURL()
		out.OtherStoreIDs = append(out.OtherStoreIDs, a.StoreID())
		out.Items += l.Items
		out.Tasks = append(out.Tasks, l.Tasks...)
	}
	return out, nil
}
