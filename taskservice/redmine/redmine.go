package redmine

// API outline agreed for the first build; the bodies are filled in by the
// adapter's own change.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// Defaults.
const (
	// DefaultField is the name of the issue custom field that carries the
	// mark (key and request digest).
	DefaultField = "sendtwice key"
	// DefaultTimeout bounds one HTTP exchange when Config gives neither an
	// HTTP client nor a timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxConns bounds the connections open to Redmine at once.
	DefaultMaxConns = 32
	// DefaultLockTTL is the per-key lock's lifetime: longer than a lookup
	// plus a create's timeout.
	DefaultLockTTL = 2*DefaultTimeout + 10*time.Second
)

// Config says where Redmine is, how to log in, where issues go, and where
// the per-key locks are kept.
type Config struct {
	// URL is Redmine's base URL ("https://redmine.example.org/" or with a
	// sub-path): http or https, a host, no user, query or fragment.
	URL string
	// APIKey is sent as X-Redmine-API-Key to URL's server and nowhere else;
	// never logged, never in an error.
	APIKey string
	// Project is the project the issues are created in: its identifier or
	// numeric id.
	Project string
	// Field is the name of the issue custom field that carries the mark
	// (DefaultField when empty). An administrator makes it once (string,
	// for all projects, used as a filter); Check refuses to serve without it.
	Field string
	// Locks holds the per-key locks (the executors' intent ledger). Create
	// needs it; New refuses a nil Locks.
	Locks taskservice.Locker
	// LockTTL is the lock's lifetime (DefaultLockTTL when zero).
	LockTTL time.Duration
	// HTTPClient, when set, makes the requests (its Timeout and Transport
	// apply); the adapter never follows a redirect.
	HTTPClient *http.Client
	// Timeout bounds one HTTP exchange when HTTPClient is nil.
	Timeout time.Duration
	// MaxConns bounds connections open at once when HTTPClient is nil.
	MaxConns int
}

// Adapter is a taskservice.Service over one Redmine project. It is safe
// for concurrent use.
type Adapter struct {
	cfg Config
}

var errNotBuilt = errors.New("redmine: not built yet")

// New checks cfg's form and returns an adapter; it makes no request.
func New(cfg Config) (*Adapter, error) { return nil, errNotBuilt }

// Check reads, creating nothing, that the login is accepted, the project
// exists and the mark's custom field exists and can be filtered on; an
// error says which and is permanent when a retry cannot help.
func (a *Adapter) Check(ctx context.Context) error { return errNotBuilt }

// Create keeps the contract: lock the key, look it up, create only when
// nothing carries it.
func (a *Adapter) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	return taskservice.Result{}, errNotBuilt
}

// Find looks the key up, creating nothing (taskservice.Finder).
func (a *Adapter) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	return taskservice.Result{}, false, errNotBuilt
}

// RemembersDeletedKeys is false: a deleted issue takes its mark with it;
// the executors' intent ledger remembers the key (taskservice.KeepDeletedKeys).
func (a *Adapter) RemembersDeletedKeys() bool { return false }

// Delete deletes the issue(s) carrying the key (scope, intentID), as its
// owner would.
func (a *Adapter) Delete(ctx context.Context, scope, intentID string) error { return errNotBuilt }

// Issue is one issue carrying a mark.
type Issue struct {
	ID            int
	Scope         string
	IntentID      string
	RequestDigest string
	Subject       string
	Closed        bool
}

// Listing is what Issues reads.
type Listing struct {
	// Issues carry a mark, open and closed, in the project.
	Issues []Issue
	// Total counts every issue of the project, marked or not.
	Total int
}

// Issues lists the project's issues that carry a mark, open and closed.
func (a *Adapter) Issues(ctx context.Context) (Listing, error) { return Listing{}, errNotBuilt }

// Naive returns a service that creates a marked issue on every call, with
// no lookup and no lock: what a plain retry does to a service with no key.
// For the probe's naive-retry row and comparisons only; never served.
func (a *Adapter) Naive() taskservice.Service {
	return taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
		return taskservice.Result{}, errNotBuilt
	})
}

// StoreID names the scope in which keys are remembered (the project on
// this server), as receipts carry it.
func (a *Adapter) StoreID() string { return "" }

// Scope says where keys are remembered, for the probe.
func (a *Adapter) Scope() string { return "" }

// URL is the base URL, normalized, without secrets.
func (a *Adapter) URL() string { return "" }

// TaskID is the task id a receipt carries for issue id.
func TaskID(issueID int) string { return "" }
