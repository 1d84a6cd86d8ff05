package redmine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/endpoint"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
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
	// DefaultLockTTL is the per-key lock's lifetime with DefaultTimeout:
	// longer than a lookup plus a create. With another timeout, the
	// default is twice it plus 10 s.
	DefaultLockTTL = 2*DefaultTimeout + 10*time.Second
	// DefaultRequestLifetime is how long after it is sent a create may
	// still land, when Config says nothing: a create whose outcome is
	// unknown leaves its key in doubt that long. Nothing in Redmine or
	// Puma bounds it: Redmine sets no request timeout of its own, and
	// Puma's defaults bound only how long it waits for a request's bytes
	// (first_data_timeout, 30 s) and, in cluster mode only, how long a
	// worker process may stop checking in (worker_timeout, 60 s: a hung
	// process, "not a request timeout"); once read, a request runs to its
	// end. Five minutes is five times the longest of these and of a front
	// proxy's usual defaults (nginx: 60 s), and thousands of times a
	// create's usual time (tens of milliseconds); a larger value only
	// makes a create that never reached Redmine wait longer before it is
	// made.
	DefaultRequestLifetime = 5 * time.Minute
	// DefaultLockPoll is how often a Create waiting for a key's lock tries
	// to take it again (with up to as much again of random delay).
	DefaultLockPoll = 100 * time.Millisecond
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
	// Locks must also keep in-doubt records (taskservice.Doubts), as the
	// intent ledger does; New refuses one that does not.
	//
	// LockTTL is the lock's lifetime (when zero: twice the HTTP timeout
	// plus 10 s, DefaultLockTTL with DefaultTimeout); it should exceed a
	// lookup. While its create is in flight, the holder renews the lock
	// (taskservice.Renewer) every third of its TTL.
	LockTTL time.Duration
	// RequestLifetime is Redmine's longest request lifetime: how long
	// after it is sent a create may still land (DefaultRequestLifetime,
	// or the HTTP timeout when longer, when zero). A create whose outcome
	// is unknown leaves its key in doubt that long. It must be at least
	// the HTTP timeout: the client waits that long for the create's
	// answer, and the create may land all that time.
	RequestLifetime time.Duration
	// LockPoll is how often a Create that finds the key's lock held tries
	// again, until the lock is free or its context ends (DefaultLockPoll
	// when zero).
	LockPoll time.Duration
	// HTTPClient, when set, makes the requests (its Timeout and Transport
	// apply); the adapter never follows a redirect. Whichever client makes
	// them, requests are OpenTelemetry client spans of the trace their
	// context holds, and carry its traceparent to the server.
	HTTPClient *http.Client
	// Timeout bounds one HTTP exchange when HTTPClient is nil.
	Timeout time.Duration
	// MaxConns bounds connections open at once when HTTPClient is nil.
	MaxConns int
	// MarkKey, when set, is the deployment's mark key (at least
	// proof.MinKeyBytes bytes; never logged, never in an error): new
	// issues carry a mark with a tag made under it, and an issue is taken
	// as a key's task only when its mark proves itself and its author is
	// the API key's user (see the package documentation). Nil: every mark
	// is believed, as before marks had tags.
	MarkKey []byte
}

// Adapter is a taskservice.Service over one Redmine project. It is safe
// for concurrent use.
type Adapter struct {
	base       *url.URL // normalized, path ends in "/"
	normalized string
	storeID    string
	apiKey     string
	project    string
	field      string
	locks      taskservice.Locker
	doubts     taskservice.Doubts
	lockTTL    time.Duration
	lifetime   time.Duration
	lockPoll   time.Duration
	client     *http.Client
	markKey    []byte // nil: marks are not proven

	mu      sync.Mutex
	checked *target // what Check found, once it found it all
}

// target is what Check finds out: the project's numeric id and identifier,
// the mark field's id, and the API key's user, the only author of the
// deployment's issues.
type target struct {
	projectID  int
	identifier string
	fieldID    int
	userID     int
	userLogin  string
}

var (
	_ taskservice.Service     = (*Adapter)(nil)
	_ taskservice.Finder      = (*Adapter)(nil)
	_ taskservice.DeletedKeys = (*Adapter)(nil)
)

// Errors of the adapter; test with errors.Is.
var (
	// ErrNoTask is wrapped by Delete when no issue carries the key.
	ErrNoTask = errors.New("redmine: no issue carries this key")
	// ErrNoField is wrapped by Check (and so by every call) when the mark's
	// custom field is missing or cannot carry the mark.
	ErrNoField = errors.New("redmine: the mark's custom field is not usable")
	// ErrDuplicates is wrapped (permanent) when two or more issues carry
	// one key.
	ErrDuplicates = errors.New("redmine: more than one issue carries this key")
)

// New checks cfg's form and returns an adapter; it makes no request.
func New(cfg Config) (*Adapter, error) {
	n, err := endpoint.Parse("redmine: URL", "give an API key", cfg.URL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, errors.New("redmine: the API key is empty")
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n\x00") {
		return nil, errors.New("redmine: the API key holds a line break or NUL (read from a file with a trailing newline?)")
	}
	if !projectRE.MatchString(cfg.Project) {
		return nil, fmt.Errorf("redmine: project %q is neither a numeric id nor a project identifier (1 to 100 of a-z, 0-9, '-', '_')", cfg.Project)
	}
	field := cfg.Field
	if field == "" {
		field = DefaultField
	}
	if strings.TrimSpace(field) != field || strings.ContainsAny(field, "\r\n") {
		return nil, fmt.Errorf("redmine: field name %q has surrounding spaces or a line break", field)
	}
	if cfg.Locks == nil {
		return nil, errors.New("redmine: Locks is nil: the per-key lock is what keeps two callers from both creating")
	}
	doubts, ok := cfg.Locks.(taskservice.Doubts)
	if !ok {
		return nil, fmt.Errorf("redmine: Locks (%T) keeps no in-doubt records (taskservice.Doubts): without them, a create whose outcome is unknown could be made again while it may still land", cfg.Locks)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LockTTL", cfg.LockTTL}, {"LockPoll", cfg.LockPoll}, {"Timeout", cfg.Timeout}, {"RequestLifetime", cfg.RequestLifetime}} {
		if d.v < 0 {
			return nil, fmt.Errorf("redmine: %s %v is negative", d.name, d.v)
		}
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("redmine: MaxConns %d is negative", cfg.MaxConns)
	}
	if err := proof.CheckKey(cfg.MarkKey); err != nil {
		return nil, fmt.Errorf("redmine: checking the mark key: %w", err)
	}
	// The API key stays with the configured server: never follow.
	client := endpoint.Client(cfg.HTTPClient, cfg.Timeout, DefaultTimeout, cfg.MaxConns, DefaultMaxConns)

	a := &Adapter{
		base:       n,
		normalized: n.String(),
		apiKey:     cfg.APIKey,
		project:    strings.ToLower(cfg.Project),
		field:      field,
		locks:      cfg.Locks,
		doubts:     doubts,
		lockTTL:    cfg.LockTTL,
		lifetime:   cfg.RequestLifetime,
		lockPoll:   cfg.LockPoll,
		client:     client,
		markKey:    bytes.Clone(cfg.MarkKey),
	}
	if err := a.defaultDurations(client.Timeout); err != nil {
		return nil, err
	}
	if a.lockPoll == 0 {
		a.lockPoll = DefaultLockPoll
	}
	sum := sha256.Sum256([]byte(a.normalized + "\n" + a.project))
	a.storeID = "redmine-" + hex.EncodeToString(sum[:])[:16]
	return a, nil
}

// defaultDurations fills in the lock's TTL and the request lifetime for an
// HTTP timeout (0: none), and refuses a lifetime shorter than the timeout.
func (a *Adapter) defaultDurations(timeout time.Duration) error {
	if a.lockTTL == 0 {
		// Two HTTP exchanges (a lookup and a create) and 10 s to spare.
		t := timeout
		if t <= 0 {
			t = DefaultTimeout
		}
		a.lockTTL = 2*t + 10*time.Second
	}
	if a.lifetime == 0 {
		a.lifetime = max(DefaultRequestLifetime, timeout)
	}
	if a.lifetime < timeout {
		// The client waits up to its timeout for the create's answer,
		// and the create may land all that time.
		return fmt.Errorf("redmine: RequestLifetime %v is shorter than the HTTP timeout %v: a create may still land as long as the client waits for its answer, so its key must stay in doubt at least that long", a.lifetime, timeout)
	}
	return nil
}

var projectRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,99}$`)

// StoreID names the scope in which keys are remembered (the project on
// this server), as receipts carry it: "redmine-" and the first 16
// hexadecimal digits of the SHA-256 of the normalized URL, a line feed and
// the project as configured (lower-case). Name a project the same way
// (identifier or id) everywhere.
func (a *Adapter) StoreID() string { return a.storeID }

// Scope says where keys are remembered, for the probe.
func (a *Adapter) Scope() string {
	return fmt.Sprintf("each caller scope, in the issues of Redmine project %q at %s (custom field %q)", a.project, a.normalized, a.field)
}

// URL is the base URL, normalized, without secrets.
func (a *Adapter) URL() string { return a.normalized }

// Project is the project as configured (lower-case).
func (a *Adapter) Project() string { return a.project }

// Field is the name of the mark's custom field.
func (a *Adapter) Field() string { return a.field }

// TaskID is the task id a receipt carries for issue id: the issue's number
// in decimal ("123" for issue #123), as Redmine shows it.
func TaskID(issueID int) string { return strconv.Itoa(issueID) }

// RemembersDeletedKeys is false: a deleted issue takes its mark with it;
// the executors' intent ledger remembers the key (taskservice.KeepDeletedKeys).
func (a *Adapter) RemembersDeletedKeys() bool { return false }

// Issue is one issue carrying a mark.
type Issue struct {
	ID            int
	Scope         string
	IntentID      string
	RequestDigest string
	Subject       string
	Closed        bool
	// Unproven, when not empty, says why the issue is not proven to be
	// this deployment's (its author is not the API key's user, or its tag
	// does not match under the mark key): it is never taken as its key's
	// task. Always empty for an adapter given no mark key.
	Unproven string
}

// Listing is what Issues reads.
type Listing struct {
	// Issues carry a mark, open and closed, in the project.
	Issues []Issue
	// Total counts every issue of the project, marked or not.
	Total int
}

// randomPoll is d plus up to d of random delay, so that waiting callers
// do not all try at once.
func randomPoll(d time.Duration) time.Duration {
	return d + rand.N(d+1)
}
