package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/taskservice"
)

// FakeDefault is the fake task service's default destination: what an
// executor serves when its gate names nothing else.
var FakeDefault = gate.Destination{Provider: document.ProviderFake, Name: document.DefaultDestination}

// Route is one destination an executor serves and the service that makes
// its tasks.
type Route struct {
	gate.Destination
	Service taskservice.Service
}

// Router is a task service that sends each call to the service of the
// call's (Provider, Destination), for an executor that serves several
// destinations (several calendars, say). The gate's destination check
// refuses a request for a destination the executor does not serve before
// any call; a call for one the router has no service for is refused again
// here, as a permanent error, and reaches no service.
type Router struct {
	routes []Route
}

// NewRouter returns a router over routes, which must name valid and
// distinct destinations, each with a service.
func NewRouter(routes ...Route) (*Router, error) {
	if len(routes) == 0 {
		return nil, errors.New("executor: a router needs at least one destination")
	}
	seen := make(map[gate.Destination]bool, len(routes))
	for _, r := range routes {
		switch {
		case r.Service == nil:
			return nil, fmt.Errorf("executor: destination %s has no task service", r.Destination)
		case !document.ValidDestination(r.Name):
			return nil, fmt.Errorf("executor: destination name %q: must be 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter", r.Name)
		case seen[r.Destination]:
			return nil, fmt.Errorf("executor: destination %s is named twice", r.Destination)
		}
		if _, known := document.CapabilityOf(r.Provider); !known {
			return nil, fmt.Errorf("executor: destination %s: unknown provider %q", r.Destination, r.Provider)
		}
		seen[r.Destination] = true
	}
	return &Router{routes: slices.Clone(routes)}, nil
}

// Serves lists the destinations the router serves, in the order given:
// the gate's Checker.Serves.
func (r *Router) Serves() []gate.Destination {
	out := make([]gate.Destination, len(r.routes))
	for i, rt := range r.routes {
		out[i] = rt.Destination
	}
	return out
}

// Create sends the call to its destination's service.
func (r *Router) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	svc, err := r.route(req)
	if err != nil {
		return taskservice.Result{}, err
	}
	return svc.Create(ctx, req)
}

// Find asks the call's destination's service to look the key up
// (taskservice.Finder), so that a router over services that forget deleted
// keys can be given the intent ledger (taskservice.KeepDeletedKeys). A
// service that offers no lookup answers with a permanent error.
func (r *Router) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	svc, err := r.route(req)
	if err != nil {
		return taskservice.Result{}, false, err
	}
	f, ok := svc.(taskservice.Finder)
	if !ok {
		return taskservice.Result{}, false, taskservice.Permanent(fmt.Errorf("executor: the task service of %s/%s offers no lookup", req.Provider, req.Destination))
	}
	return f.Find(ctx, req)
}

// RemembersDeletedKeys reports whether every destination's service
// remembers the keys of deleted tasks itself.
func (r *Router) RemembersDeletedKeys() bool {
	for _, rt := range r.routes {
		if !taskservice.RemembersDeletedKeys(rt.Service) {
			return false
		}
	}
	return true
}

// ErrNoRoute is wrapped by a call for a destination the router does not
// serve.
var ErrNoRoute = errors.New("executor: no task service for this destination")

func (r *Router) route(req taskservice.Request) (taskservice.Service, error) {
	rt, err := r.lookup(req)
	return rt.Service, err
}

// lookup finds the route of req's (Provider, Destination).
func (r *Router) lookup(req taskservice.Request) (Route, error) {
	d := gate.Destination{Provider: req.Provider, Name: req.Destination}
	if d.Name == "" {
		d.Name = document.DefaultDestination
	}
	for _, rt := range r.routes {
		if rt.Destination == d {
			return rt, nil
		}
	}
	names := make([]string, len(r.routes))
	for i, rt := range r.routes {
		names[i] = rt.Destination.String()
	}
	return Route{}, taskservice.Permanent(fmt.Errorf("%w: the call is for %s, but this executor serves only %s; nothing was sent",
		ErrNoRoute, d, strings.Join(names, ", ")))
}
