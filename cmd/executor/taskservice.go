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
//     does not connect to NATS only to reach a service over HTTP (true for
//     redmine, whose per-key locks live in the intent ledger on JetStream:
//     open then takes the ledger through connect). Where the service can
//     say so without creating anything, reach checks that it answers and
//     accepts the login (serve, probe and demo call it first), list reads
//     its tasks (the demo's figures), and audit lists them for verify.
//
// An adapter's HTTP client is built here, with a bounded transport (at
// most the adapter's DefaultMaxConns connections to the server at once)
// wrapped by the lossy transport that lets the probe lose a reply.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/demo"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// Task service kinds, the values of --task-service.
const (
	taskServiceFake    = "fake"
	taskServiceCalDAV  = "caldav"
	taskServiceRedmine = "redmine"
)

// caldavPasswordEnv holds the CalDAV password when --caldav-password-file
// is not given.
const caldavPasswordEnv = "CALDAV_PASSWORD"

// redmineAPIKeyEnv holds the Redmine API key when --redmine-api-key-file is
// not given.
const redmineAPIKeyEnv = "REDMINE_API_KEY"

// The classes of task service, as the probe states them.
const (
	classKeepsKeys = "keeps keys"
	classAtomic    = "atomic create-if-absent"
	classNoKey     = "no key: the adapter looks up and locks"
)

// taskServiceKinds lists the kinds with a line of help each, in the order
// --help shows them.
var taskServiceKinds = []struct{ name, help string }{
	{taskServiceFake, "the fake task service over NATS"},
	{taskServiceCalDAV, "a CalDAV (RFC 4791) task collection: one VTODO per intent, --caldav-url"},
	{taskServiceRedmine, "a Redmine project: one issue per intent, marked with its key, looked up and locked\n(in the intent ledger on NATS) before a create, --redmine-url and --redmine-project"},
}

// redmineFlagNames are the flags of --task-service redmine.
var redmineFlagNames = []string{"redmine-url", "redmine-project", "redmine-field", "redmine-api-key-file", "redmine-lock-ttl"}

// taskServiceFlags are the flags that choose and configure the task
// service.
type taskServiceFlags struct {
	Kind string

	CalDAVURL          string
	CalDAVUser         string
	CalDAVPasswordFile string
	// CalDAVCalendar, when set, names the calendar of destination default
	// by its display name: CalDAVURL is then the server's URL, and open
	// finds the calendar (caldav.FindCalendar).
	CalDAVCalendar string
	// CalDAVCAFile holds PEM certificates trusted as roots besides the
	// system's, for a server with a certificate of its own.
	CalDAVCAFile string
	// Destinations are the --destination NAME=URL flags, in order, and
	// DestinationsFile the file of more (lines "NAME URL").
	Destinations     []string
	DestinationsFile string
	// caldavDests are the CalDAV destinations check resolved from
	// --caldav-url, --destination and --destinations, in that order.
	caldavDests []caldavDest
	// caldavRoots are the roots of --caldav-ca-file, read by check.
	caldavRoots *x509.CertPool
	// calDAVPassword is read by check, after parsing, from the file or the
	// environment; never a flag value, never logged.
	calDAVPassword string

	RedmineURL        string
	RedmineProject    string
	RedmineField      string
	RedmineAPIKeyFile string
	// RedmineLockTTL is the per-key lock's lifetime; zero takes
	// 2 × the call timeout + 10 s (lockTTL).
	RedmineLockTTL time.Duration
	// redmineAPIKey is read by check, after parsing, from the file or the
	// environment; never a flag value, never logged.
	redmineAPIKey string

	// ProvisionLedger and LedgerReplicas say whether open may create or
	// update the intent ledger's bucket, with how many replicas, for a kind
	// that keeps its locks there (redmine); false only finds it. A command
	// sets them before open.
	ProvisionLedger bool
	LedgerReplicas  int

	// fs is the flag set the flags were added to: check asks it which
	// were given.
	fs *flag.FlagSet
	// getenv reads the environment; tests replace it.
	getenv func(string) string
}

// taskServiceFlagsVar adds --task-service (and, per kind, its own flags) to
// fs.
func taskServiceFlagsVar(fs *flag.FlagSet) *taskServiceFlags {
	f := &taskServiceFlags{getenv: os.Getenv, fs: fs}
	names := make([]string, 0, len(taskServiceKinds))
	for _, k := range taskServiceKinds {
		names = append(names, k.name+": "+k.help)
	}
	fs.StringVar(&f.Kind, "task-service", taskServiceFake, "which task `SERVICE` to call; one of\n"+strings.Join(names, "\n"))
	fs.StringVar(&f.CalDAVURL, "caldav-url", "", "with --task-service caldav: the `URL` of the calendar collection that holds the tasks\n(for example https://dav.example.org/alice/tasks/)")
	fs.StringVar(&f.CalDAVUser, "caldav-user", "", "with --task-service caldav: the `USER` to log in as (HTTP basic authentication)")
	fs.StringVar(&f.CalDAVPasswordFile, "caldav-password-file", "", "with --task-service caldav: a `FILE` holding the password (default: $"+caldavPasswordEnv+")")
	fs.StringVar(&f.CalDAVCalendar, "caldav-calendar", "", "with --task-service caldav: the display `NAME` of the calendar of destination default;\n--caldav-url is then the server's URL, and the calendar is found the standard way\n(/.well-known/caldav, the principal, its calendar home)")
	fs.StringVar(&f.CalDAVCAFile, "caldav-ca-file", "", "with --task-service caldav: a `FILE` of PEM certificates to trust as roots, besides the system's\n(for a server with a self-signed certificate)")
	fs.Func("destination", "with --task-service caldav: one more destination, `NAME=URL`: requests that name destination NAME\nare made in the calendar collection at URL (repeatable; --caldav-url is destination default).\nserve serves every destination given and verify audits them all; probe and demo use\ndestination default, or else the first one given", func(v string) error {
		f.Destinations = append(f.Destinations, v)
		return nil
	})
	fs.StringVar(&f.DestinationsFile, "destinations", "", "with --task-service caldav: a `FILE` of destinations, one a line: NAME URL (# starts a comment)")
	fs.StringVar(&f.RedmineURL, "redmine-url", "", "with --task-service redmine: Redmine's base `URL` (for example https://redmine.example.org/)")
	fs.StringVar(&f.RedmineProject, "redmine-project", "", "with --task-service redmine: the project the issues are created in, by its identifier or numeric `ID`")
	fs.StringVar(&f.RedmineField, "redmine-field", redmine.DefaultField, "with --task-service redmine: the `NAME` of the issue custom field that carries each issue's key\n(an administrator makes it once: format string, for all projects, used as a filter)")
	fs.StringVar(&f.RedmineAPIKeyFile, "redmine-api-key-file", "", "with --task-service redmine: a `FILE` holding the API key (default: $"+redmineAPIKeyEnv+")")
	fs.DurationVar(&f.RedmineLockTTL, "redmine-lock-ttl", 0, "with --task-service redmine: the life of a key's lock in the intent ledger, longer than --call-timeout\n(default: 2 × the call timeout + 10s)")
	return f
}

// errTaskServiceRefused is returned by serve when the task service refuses
// it before the first delivery (a wrong URL or password).
var errTaskServiceRefused = errors.New("the task service refuses this executor")

// errUnknownTaskService is wrapped by check for an unknown --task-service.
var errUnknownTaskService = errors.New("unknown task service")

// check validates the flags after parsing, and reads the CalDAV password
// or the Redmine API key from its file or the environment; its errors are
// usage errors. A command that creates also calls checkCallTimeout.
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
	caldavSet := f.CalDAVURL != "" || f.CalDAVUser != "" || f.CalDAVPasswordFile != "" || f.CalDAVCalendar != "" || f.CalDAVCAFile != "" ||
		len(f.Destinations) > 0 || f.DestinationsFile != ""
	if f.Kind != taskServiceCalDAV && caldavSet {
		return fmt.Errorf("%w: --caldav-url, --caldav-user, --caldav-password-file, --caldav-calendar, --caldav-ca-file, --destination and --destinations need --task-service caldav", errUsage)
	}
	if f.Kind != taskServiceRedmine {
		if set := f.setRedmineFlags(); len(set) > 0 {
			return fmt.Errorf("%w: --%s: the flags %s need --task-service redmine", errUsage, set[0], "--"+strings.Join(redmineFlagNames, ", --"))
		}
	}
	switch f.Kind {
	case taskServiceCalDAV:
		return f.checkCalDAV()
	case taskServiceRedmine:
		return f.checkRedmine()
	}
	return nil
}

// setRedmineFlags names the redmine flags given on the command line (or
// set to a value of their own, for a flag set that was not parsed).
func (f *taskServiceFlags) setRedmineFlags() []string {
	var set []string
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(redmineFlagNames, fl.Name) {
				set = append(set, fl.Name)
			}
		})
	}
	if len(set) == 0 && (f.RedmineURL != "" || f.RedmineProject != "" || f.RedmineAPIKeyFile != "" || f.RedmineLockTTL != 0 ||
		f.RedmineField != "" && f.RedmineField != redmine.DefaultField) {
		set = append(set, "redmine-url")
	}
	return set
}

// checkRedmine checks the redmine flags and reads the API key from its
// file or the environment.
func (f *taskServiceFlags) checkRedmine() error {
	if f.RedmineURL == "" {
		return fmt.Errorf("%w: --task-service redmine needs --redmine-url", errUsage)
	}
	if f.RedmineProject == "" {
		return fmt.Errorf("%w: --task-service redmine needs --redmine-project", errUsage)
	}
	if strings.TrimSpace(f.RedmineField) == "" {
		return fmt.Errorf("%w: --redmine-field is empty: name the issue custom field that carries the key (default %q)", errUsage, redmine.DefaultField)
	}
	if f.RedmineLockTTL < 0 {
		return fmt.Errorf("%w: --redmine-lock-ttl %s is negative", errUsage, f.RedmineLockTTL)
	}
	if f.RedmineAPIKeyFile != "" {
		b, err := os.ReadFile(f.RedmineAPIKeyFile)
		if err != nil {
			return fmt.Errorf("%w: --redmine-api-key-file: %w", errUsage, err)
		}
		f.redmineAPIKey = strings.TrimSpace(string(b))
		if f.redmineAPIKey == "" {
			return fmt.Errorf("%w: --redmine-api-key-file %s is empty", errUsage, f.RedmineAPIKeyFile)
		}
	} else if f.getenv != nil {
		f.redmineAPIKey = strings.TrimSpace(f.getenv(redmineAPIKeyEnv))
	}
	if f.redmineAPIKey == "" {
		return fmt.Errorf("%w: --task-service redmine needs an API key: --redmine-api-key-file FILE or $%s (a user's key, under My account, API access key)", errUsage, redmineAPIKeyEnv)
	}
	// Checks the URL's and the project's form without a request.
	if _, err := redmine.New(f.redmineConfig(refusingLocker{}, time.Second)); err != nil {
		return fmt.Errorf("%w: --redmine-url, --redmine-project, --redmine-field: %w", errUsage, err)
	}
	return nil
}

// lockTTL is the redmine lock's lifetime for calls of callTimeout.
func (f *taskServiceFlags) lockTTL(callTimeout time.Duration) time.Duration {
	if f.RedmineLockTTL > 0 {
		return f.RedmineLockTTL
	}
	return 2*callTimeout + 10*time.Second
}

// checkCallTimeout refuses a redmine lock that could run out while a call
// still runs: its TTL must be longer than the call timeout, or a create
// sent by a holder near the call's end may land after another took the
// lock. A command calls it after check, with its call timeout; it says
// nothing for other kinds.
func (f *taskServiceFlags) checkCallTimeout(callTimeout time.Duration) error {
	if f.Kind != taskServiceRedmine {
		return nil
	}
	if ttl := f.lockTTL(callTimeout); ttl <= callTimeout {
		return fmt.Errorf("%w: --redmine-lock-ttl %s is not longer than the call timeout %s: a lock must outlive a lookup and a create", errUsage, ttl, callTimeout)
	}
	return nil
}

// redmineConfig is the adapter's configuration of the flags, with its
// locks and its HTTP timeout, the call timeout (the adapter refuses a lock
// TTL not longer than it).
func (f *taskServiceFlags) redmineConfig(locks taskservice.Locker, callTimeout time.Duration) redmine.Config {
	return redmine.Config{URL: f.RedmineURL, APIKey: f.redmineAPIKey, Project: f.RedmineProject, Field: f.RedmineField,
		Locks: locks, LockTTL: f.lockTTL(callTimeout), Timeout: callTimeout}
}

// refusingLocker stands for the ledger where the adapter is built only to
// check the flags' form; it never gives a lock.
type refusingLocker struct{}

func (refusingLocker) Lock(context.Context, string, string, time.Duration) (taskservice.Lock, error) {
	return nil, errors.New("no lock is taken while the flags are checked")
}

func (f *taskServiceFlags) checkCalDAV() error {
	if f.CalDAVCalendar != "" && f.CalDAVURL == "" {
		return fmt.Errorf("%w: --caldav-calendar needs --caldav-url, the server's URL, to find the calendar on", errUsage)
	}
	dests, err := f.calDAVDestinations()
	if err != nil {
		return err
	}
	if len(dests) == 0 {
		return fmt.Errorf("%w: --task-service caldav needs a calendar collection: --caldav-url URL (destination default), --destination NAME=URL or --destinations FILE", errUsage)
	}
	f.caldavDests = dests
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
	if f.CalDAVCAFile != "" {
		if f.caldavRoots, err = readRoots(f.CalDAVCAFile); err != nil {
			return fmt.Errorf("%w: --caldav-ca-file: %w", errUsage, err)
		}
	}
	// Checks the URLs' form without a request.
	for _, d := range dests {
		if _, err := caldav.New(caldav.Config{CollectionURL: d.URL}); err != nil {
			return fmt.Errorf("%w: %s: %w", errUsage, d.from, err)
		}
	}
	return nil
}

// caldavDest is one CalDAV destination: its name, its collection's URL
// (the server's, for a calendar found by name), and the flag or file line
// that gave it, for errors.
type caldavDest struct {
	Name, URL, from string
	// calendar is the display name to find on the server at URL; empty
	// when URL is the collection.
	calendar string
	// collection is the collection's URL as the adapter opened it (the
	// calendar found, for one found by name); set by open.
	collection string
}

// calDAVDestinations reads the destinations of --caldav-url,
// --destination and --destinations, in that order, and refuses a name
// given twice or not valid.
func (f *taskServiceFlags) calDAVDestinations() ([]caldavDest, error) {
	var dests []caldavDest
	if f.CalDAVURL != "" {
		from := "--caldav-url"
		if f.CalDAVCalendar != "" {
			from = "--caldav-url with --caldav-calendar"
		}
		dests = append(dests, caldavDest{Name: document.DefaultDestination, URL: f.CalDAVURL, from: from, calendar: f.CalDAVCalendar})
	}
	for i, v := range f.Destinations {
		// The value is not echoed: a URL may carry a password.
		name, url, ok := strings.Cut(v, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("%w: --destination (number %d): want NAME=URL (for example team=https://dav.example.org/alice/team/)", errUsage, i+1)
		}
		from := "--destination " + name
		if !document.ValidDestination(name) {
			from = fmt.Sprintf("--destination (number %d)", i+1)
		}
		dests = append(dests, caldavDest{Name: name, URL: url, from: from})
	}
	if f.DestinationsFile != "" {
		fromFile, err := readDestinationsFile(f.DestinationsFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --destinations: %w", errUsage, err)
		}
		dests = append(dests, fromFile...)
	}
	seen := map[string]string{}
	for _, d := range dests {
		if !document.ValidDestination(d.Name) {
			return nil, fmt.Errorf("%w: %s: the destination name must be 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter", errUsage, d.from)
		}
		if first, dup := seen[d.Name]; dup {
			return nil, fmt.Errorf("%w: %s: destination %q is already given by %s; each name is one calendar", errUsage, d.from, d.Name, first)
		}
		seen[d.Name] = d.from
	}
	return dests, nil
}

// readDestinationsFile reads a file of destinations: one a line, NAME and
// URL separated by white space; blank lines and lines starting with # are
// skipped. Errors name the file and line.
func readDestinationsFile(path string) ([]caldavDest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var dests []caldavDest
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, i+1)
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s: want NAME URL, found %d field(s)", where, len(fields))
		}
		dests = append(dests, caldavDest{Name: fields[0], URL: fields[1], from: where})
	}
	return dests, nil
}

// caldavTransport is the transport of every CalDAV request a command makes:
// at most caldav.DefaultMaxConns connections to a server at once, however
// many of its calendars are used, trusting the roots of --caldav-ca-file
// (read by check) besides the system's.
func (f *taskServiceFlags) caldavTransport() *http.Transport {
	t := boundedTransport(caldav.DefaultMaxConns)
	if f.caldavRoots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: f.caldavRoots, MinVersion: tls.VersionTLS12}
	}
	return t
}

// readRoots reads the PEM certificates of path into a pool holding the
// system's roots as well.
func readRoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// needsNATS reports whether the chosen service is reached over NATS, so
// that open needs a connection.
func (f *taskServiceFlags) needsNATS() bool {
	return f.Kind == taskServiceFake || f.Kind == taskServiceRedmine
}

// needsLedger reports whether the chosen service needs the executors'
// intent ledger: one that forgets a key when its task is deleted (caldav,
// redmine), or keeps its per-key locks there (redmine).
func (f *taskServiceFlags) needsLedger() bool {
	return f.Kind == taskServiceCalDAV || f.Kind == taskServiceRedmine
}

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
	list func(ctx context.Context) (demo.Listing, error)
	// audit lists the tasks for verify, for a kind that keeps no call log;
	// nil for the fake service, which verify reads over NATS.
	audit audit.TaskLister
	// ledger is the intent ledger open took for a kind that keeps its
	// locks there; keepDeletedKeys composes the service with the same one.
	ledger *ledger.Ledger
	// oneTaskPerKey, for a service of several CalDAV destinations, wraps
	// its router so that a key has one task across them: a create takes
	// the key's lock in the intent ledger and looks the key up in every
	// other destination first (executor.Router.OneTaskPerKey).
	// keepDeletedKeys applies it with the ledger it opens; nil otherwise.
	oneTaskPerKey func(locks taskservice.Locker) (taskservice.Service, error)
	close         func() error
	// serves lists the (provider, destination) pairs the service serves:
	// the gate's Checker.Serves. where says, for each, where its tasks are
	// made, for serve's log.
	serves []gate.Destination
	where  []string
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
func (f *taskServiceFlags) open(ctx context.Context, connect func() (*nats.Conn, error), callTimeout time.Duration) (*taskService, error) {
	switch f.Kind {
	case taskServiceFake:
		nc, err := connect()
		if err != nil {
			return nil, err
		}
		t := fakeTarget(nc, callTimeout)
		t.Provider, t.Destination = document.ProviderFake, document.DefaultDestination
		return &taskService{Target: t, serves: []gate.Destination{executor.FakeDefault}, where: []string{executor.FakeDefault.String() + " at the fake task service over NATS"}}, nil
	case taskServiceCalDAV:
		return f.openCalDAV(ctx, callTimeout)
	case taskServiceRedmine:
		// The lock TTL against the call timeout is checked by the
		// commands that create (serve, probe: checkCallTimeout), before
		// they open anything; verify only lists.
		nc, err := connect()
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("opening the intent ledger for Redmine's locks: %w", err)
		}
		if f.ProvisionLedger {
			if err := ledger.Ensure(ctx, js, max(f.LedgerReplicas, 1)); err != nil {
				return nil, fmt.Errorf("opening the intent ledger for Redmine's locks: %w", err)
			}
		}
		l, err := ledger.Open(ctx, js, ledger.Options{})
		if err != nil {
			return nil, fmt.Errorf("opening the intent ledger for Redmine's locks: %w", err)
		}
		t, a, err := redmineTarget(f.redmineConfig(l, callTimeout), callTimeout)
		if err != nil {
			return nil, err
		}
		redmineDefault := gate.Destination{Provider: document.ProviderRedmine, Name: document.DefaultDestination}
		t.Provider, t.Destination = redmineDefault.Provider, redmineDefault.Name
		return &taskService{Target: t, ledger: l, audit: redmineLister(a), serves: []gate.Destination{redmineDefault}, where: []string{redmineDefault.String() + " at " + t.Name}, reach: func(ctx context.Context) error {
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
// itself is left as it is. Several CalDAV destinations also take their
// per-key locks in the same ledger (oneTaskPerKey), applied first. It
// returns what the ledger is, for a log line, or "" when none is used.
func (s *taskService) keepDeletedKeys(ctx context.Context, js jetstream.JetStream, provision bool, replicas int) (string, error) {
	if taskservice.RemembersDeletedKeys(s.Service) {
		return "", nil
	}
	if s.ledger != nil {
		// open took it already, for the locks.
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

// fakeTarget presents the fake task service on nc. It deletes a task as its
// owner would (the service's delete endpoint, by the key's scope and
// intent id), and the service keeps the key;
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
		Name:        "fake task service",
		Service:     c.TaskService(),
		Scope:       "each caller scope, in the service",
		Class:       classKeepsKeys,
		NaiveWhyNot: "the service keeps the key itself: every create it takes is keyed",
		FindWhyNot:  "the service decides a create by its key in one step; no lookup precedes it",
		Delete: func(ctx context.Context, scope, intentID string) error {
			_, err := c.Delete(ctx, provider.DeleteRequest{Scope: scope, IntentID: intentID})
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
			// The probe's keys are in its own scope.
			req := provider.RecordsRequest{Kind: provider.RecordTasks, Scope: probe.Scope, IntentID: intentID, Limit: provider.MaxRecordsLimit}
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

// openCalDAV opens the CalDAV destinations: one adapter per collection,
// all of them on ONE bounded transport (at most caldav.DefaultMaxConns
// connections to a server at once, however many of its calendars are
// served), trusting the roots of --caldav-ca-file as well. A destination
// given by --caldav-calendar is found on its server first. The Service is
// a router that sends each call to its destination's adapter (with more
// than one destination, keepDeletedKeys keeps a key to one task across
// them: oneTaskPerKey); the Target's other parts (delete, count, lose a
// reply, list) are those of the destination probe and demo use: default,
// or else the first one given; verify's listing (audit) holds every
// destination's tasks.
func (f *taskServiceFlags) openCalDAV(ctx context.Context, callTimeout time.Duration) (*taskService, error) {
	lossy := &lossyTransport{method: http.MethodPut, next: f.caldavTransport()}
	var (
		routes   []executor.Route
		adapters []*caldav.Adapter
		where    []string
	)
	for i, d := range f.caldavDests {
		cfg := caldav.Config{CollectionURL: d.URL, Username: f.CalDAVUser, Password: f.calDAVPassword,
			HTTPClient: &http.Client{Transport: lossy, Timeout: callTimeout}}
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
		f.caldavDests[i].collection = a.CollectionURL()
		dest := gate.Destination{Provider: document.ProviderCalDAV, Name: d.Name}
		routes = append(routes, executor.Route{Destination: dest, Service: a})
		adapters = append(adapters, a)
		where = append(where, dest.String()+" at "+a.CollectionURL())
	}
	router, err := executor.NewRouter(routes...)
	if err != nil {
		return nil, err
	}
	use := 0
	for i, d := range f.caldavDests {
		if d.Name == document.DefaultDestination {
			use = i
		}
	}
	a := adapters[use]
	var others []*caldav.Adapter
	for i, o := range adapters {
		if i != use {
			others = append(others, o)
		}
	}
	t := caldavTarget(a, lossy)
	t.Service = router
	t.Provider, t.Destination = document.ProviderCalDAV, f.caldavDests[use].Name
	if len(adapters) > 1 {
		t.Name += " (destination " + t.Destination + ")"
	}
	ts := &taskService{Target: t, audit: calDAVLister(a, others...), serves: router.Serves(), where: where, reach: func(ctx context.Context) error {
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
	}}
	if len(adapters) > 1 {
		// Each collection decides a create for itself; across them the
		// key's lock in the intent ledger does, with Redmine's lifetime.
		ts.oneTaskPerKey = func(locks taskservice.Locker) (taskservice.Service, error) {
			return router.OneTaskPerKey(locks, 2*callTimeout+10*time.Second)
		}
	}
	return ts, nil
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

// caldavTarget presents a CalDAV collection, reached through lossy. Its
// Service is the adapter alone, which forgets a key when its task is
// deleted: serve and probe compose it with the intent ledger
// (keepDeletedKeys). A task can be deleted (only one the adapter made for
// that intent, as its owner would); its tasks are counted from the
// collection's listing; a reply is lost by the transport, which lets the
// server answer and then drops the answer, as a broken connection would.
func caldavTarget(a *caldav.Adapter, lossy *lossyTransport) probe.Target {
	return probe.Target{
		Name:         "CalDAV collection " + a.CollectionURL(),
		Service:      a,
		Scope:        a.Scope(),
		Class:        classAtomic,
		NaiveWhyNot:  "every create is a PUT with If-None-Match: *, which the server refuses for a name it holds",
		FindWhyNot:   "the server's create-if-absent decides a create; no lookup precedes it",
		Delete:       a.DeleteIn,
		LoseReplyHow: "the server answers the PUT; the answer is dropped before the adapter reads it",
		LoseReply:    lossy.arm,
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
	}
}

// redmineTarget presents a Redmine project. Its Service is the adapter,
// which forgets a key when its issue is deleted: serve and probe compose
// it with the intent ledger (keepDeletedKeys), which also holds its locks
// (cfg.Locks). An issue is deleted through the adapter (the issues that
// carry the key, as their owner would); issues are counted from the
// project's listing; the reply to a POST is lost by the transport after
// Redmine answered; a naive create (no lookup, no lock) and a lookup are
// offered for the probe's rows that show why the adapter's protocol is
// needed and what it relies on.
func redmineTarget(cfg redmine.Config, callTimeout time.Duration) (probe.Target, *redmine.Adapter, error) {
	lossy := &lossyTransport{method: http.MethodPost, next: boundedTransport(redmine.DefaultMaxConns)}
	cfg.HTTPClient = &http.Client{Transport: lossy, Timeout: callTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a, err := redmine.New(cfg)
	if err != nil {
		return probe.Target{}, nil, err
	}
	return probe.Target{
		Name:    "Redmine project " + a.Project() + " at " + a.URL(),
		Service: a,
		Scope:   a.Scope(),
		Class:   classNoKey,
		Naive:   a.Naive(),
		Find:    a.Find,
		Delete: func(ctx context.Context, scope, intentID string) error {
			return a.Delete(ctx, scope, intentID)
		},
		LoseReplyHow: "Redmine answers the POST; the answer is dropped before the adapter reads it",
		LoseReply:    lossy.arm,
		Count: func(ctx context.Context, intentID string) (int, error) {
			l, err := a.Issues(ctx)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, i := range l.Issues {
				if i.IntentID == intentID {
					n++
				}
			}
			return n, nil
		},
	}, a, nil
}

// boundedTransport is a transport that keeps at most maxConns connections
// to a host open at once; further requests wait for one to be free, so
// that a burst of deliveries does not open a connection each.
func boundedTransport(maxConns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = maxConns
	t.MaxIdleConnsPerHost = maxConns
	return t
}

// calDAVLister presents CalDAV collections to verify, by the tasks they
// list: the first, and those of the executors' other destinations, whose
// stores are audited with it (a key has one task across all of them).
func calDAVLister(first *caldav.Adapter, others ...*caldav.Adapter) audit.TaskLister {
	return audit.ListerFunc(func(ctx context.Context) (audit.TaskListing, error) {
		out := audit.TaskListing{Name: "CalDAV collection " + first.CollectionURL(), StoreID: first.StoreID(),
			NoCallLog: "the CalDAV server keeps no call log"}
		if len(others) > 0 {
			out.Name = "CalDAV collections " + first.CollectionURL()
		}
		for _, a := range append([]*caldav.Adapter{first}, others...) {
			l, err := a.Tasks(ctx)
			if err != nil {
				return audit.TaskListing{}, fmt.Errorf("listing the tasks of the collection %s: %w", a.CollectionURL(), err)
			}
			if a != first {
				out.Name += ", " + a.CollectionURL()
				out.OtherStoreIDs = append(out.OtherStoreIDs, a.StoreID())
			}
			out.Items += l.VTODOs
			for _, t := range l.Tasks {
				out.Tasks = append(out.Tasks, audit.ListedTask{Scope: t.Scope, IntentID: t.IntentID, TaskID: t.TaskID, RequestDigest: t.RequestDigest, Where: t.Href, Title: t.Title})
			}
		}
		return out, nil
	})
}

// redmineLister presents a Redmine project to verify, by the issues that
// carry a key, open and closed.
func redmineLister(a *redmine.Adapter) audit.TaskLister {
	return audit.ListerFunc(func(ctx context.Context) (audit.TaskListing, error) {
		l, err := a.Issues(ctx)
		if err != nil {
			return audit.TaskListing{}, fmt.Errorf("listing the project's issues: %w", err)
		}
		out := audit.TaskListing{Name: "Redmine project " + a.Project() + " at " + a.URL(), StoreID: a.StoreID(), Items: l.Total,
			NoCallLog: "Redmine keeps no call log"}
		for _, i := range l.Issues {
			out.Tasks = append(out.Tasks, audit.ListedTask{Scope: i.Scope, IntentID: i.IntentID, TaskID: redmine.TaskID(i.ID),
				RequestDigest: i.RequestDigest, Where: "issue #" + strconv.Itoa(i.ID), Title: i.Subject})
		}
		return out, nil
	})
}

// errReplyLost is what a call whose reply was dropped on purpose returns.
var errReplyLost = errors.New("the reply was lost on purpose after the server answered")

// lossyTransport passes requests on; while drop is positive, it lets the
// server answer a request of method (a PUT, a POST), then drops the answer
// and returns errReplyLost.
type lossyTransport struct {
	method string
	next   http.RoundTripper
	drop   atomic.Int64
}

// arm drops the answer of the next request of t's method (a Target's
// LoseReply); disarm undoes it if no such request came.
func (t *lossyTransport) arm(context.Context) (func(context.Context) error, error) {
	t.drop.Store(1)
	return func(context.Context) error { t.drop.Store(0); return nil }, nil
}

func (t *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != t.method {
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
