package service

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
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// Task service kinds, the values of --task-service.
const (
	KindFake    = "fake"
	KindCalDAV  = "caldav"
	KindRedmine = "redmine"
)

// CalDAVPasswordEnv holds the CalDAV password when --caldav-password-file
// is not given.
const CalDAVPasswordEnv = "CALDAV_PASSWORD"

// RedmineAPIKeyEnv holds the Redmine API key when --redmine-api-key-file is
// not given.
const RedmineAPIKeyEnv = "REDMINE_API_KEY"

// kinds lists the kinds with a line of help each, in the order
// --help shows them.
var kinds = []struct{ name, help string }{
	{KindFake, "the fake task service over NATS"},
	{KindCalDAV, "a CalDAV (RFC 4791) task collection: one VTODO per intent, --caldav-url"},
	{KindRedmine, "a Redmine project: one issue per intent, marked with its key, looked up and locked\n(in the intent ledger on NATS) before a create, --redmine-url and --redmine-project"},
}

// redmineFlagNames are the flags of --task-service redmine.
var redmineFlagNames = []string{"redmine-url", "redmine-project", "redmine-field", "redmine-api-key-file", "redmine-lock-ttl", "redmine-request-lifetime"}

// Config are the flags that choose and configure the task
// service.
type Config struct {
	Kind string

	CalDAVURL          string
	CalDAVUser         string
	CalDAVPasswordFile string
	// CalDAVCalendar, when set, names the calendar of destination default
	// by its display name, and CalDAVServer the server Open finds it on
	// (caldav.FindCalendar); CalDAVURL, the collection itself, is then
	// left empty.
	CalDAVCalendar string
	// CalDAVServer is the CalDAV server's URL, or any URL on it, that
	// calendars are discovered from.
	CalDAVServer string
	// CalDAVCAFile holds PEM certificates trusted as roots besides the
	// system's, for a server with a certificate of its own.
	CalDAVCAFile string
	// Destinations are the --destination NAME=URL flags, in order, and
	// DestinationsFile the file of more (--destinations-file: lines
	// "NAME URL").
	Destinations     []string
	DestinationsFile string
	// caldavDests are the CalDAV destinations Check resolved from
	// --caldav-url (or --caldav-server with --caldav-calendar),
	// --destination and --destinations-file, in that order.
	caldavDests []caldavDest
	// caldavRoots are the roots of --caldav-ca-file, read by Check.
	caldavRoots *x509.CertPool
	// calDAVPassword is read by Check, after parsing, from the file or the
	// environment; never a flag value, never logged.
	calDAVPassword string

	RedmineURL        string
	RedmineProject    string
	RedmineField      string
	RedmineAPIKeyFile string
	// RedmineLockTTL is the per-key lock's lifetime; zero takes
	// 2 × the call timeout + 10 s (lockTTL).
	RedmineLockTTL time.Duration
	// RedmineRequestLifetime is Redmine's longest request lifetime, how
	// long a create whose outcome is unknown leaves its key in doubt;
	// zero takes redmine.DefaultRequestLifetime (or the call timeout when
	// longer).
	RedmineRequestLifetime time.Duration
	// redmineAPIKey is read by Check, after parsing, from the file or the
	// environment; never a flag value, never logged.
	redmineAPIKey string

	// ProvisionLedger and LedgerReplicas say whether Open may create or
	// update the intent ledger's bucket, with how many replicas, for a kind
	// that keeps its locks there (redmine); false only finds it. A command
	// sets them before Open.
	ProvisionLedger bool
	LedgerReplicas  int
	// markKey is the deployment's mark key (TakeMarkKey), with which the
	// adapters tag and prove their tasks; nil leaves them untagged (the
	// demo, whose stores are its own, and flag checks).
	markKey []byte

	// LoseReplies asks Open for a service whose next reply can be lost
	// on purpose (Service.LoseReply), for the probe, the demo and tests:
	// a fault transport then sits on every HTTP call. serve leaves it
	// false.
	LoseReplies bool

	// urlFromRecord is set by settle when a URL (a CalDAV collection,
	// Redmine's) was taken from the executors' record, not the command
	// line: no password or API key is sent there (SecretHint).
	urlFromRecord bool

	// fs is the flag set the flags were added to: Check asks it which
	// were given.
	fs *flag.FlagSet
	// getenv reads the environment; tests replace it.
	getenv func(string) string
}

// FlagsVar adds --task-service (and, per kind, its own flags) to
// fs, shown in its help in a group per kind.
func FlagsVar(fs *flag.FlagSet) *Config {
	f := &Config{getenv: os.Getenv, fs: fs}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.name+": "+k.help)
	}
	fs.StringVar(&f.Kind, "task-service", KindFake, "which task `SERVICE` to call; one of\n"+strings.Join(names, "\n"))
	fs.StringVar(&f.CalDAVURL, "caldav-url", "", "with --task-service caldav: the `URL` of the calendar collection that holds the tasks\n(for example https://dav.example.org/alice/tasks/)")
	fs.StringVar(&f.CalDAVUser, "caldav-user", "", "with --task-service caldav: the `USER` to log in as (HTTP basic authentication)")
	fs.StringVar(&f.CalDAVPasswordFile, "caldav-password-file", "", "with --task-service caldav: a `FILE` holding the password (default: $"+CalDAVPasswordEnv+")")
	fs.StringVar(&f.CalDAVCalendar, "caldav-calendar", "", "with --task-service caldav, instead of --caldav-url: the display `NAME` of the calendar of destination default,\nfound on --caldav-server the standard way (/.well-known/caldav, the principal, its calendar home)")
	fs.StringVar(&f.CalDAVServer, "caldav-server", "", "with --caldav-calendar: the `URL` of the CalDAV server, or any URL on it, where the calendar is found")
	fs.StringVar(&f.CalDAVCAFile, "caldav-ca-file", "", "with --task-service caldav: a `FILE` of PEM certificates to trust as roots, besides the system's\n(for a server with a self-signed certificate)")
	fs.Func("destination", "with --task-service caldav: one more destination, `NAME=URL`: requests that name destination NAME\nare made in the calendar collection at URL (repeatable; --caldav-url is destination default).\nserve serves every destination given and verify audits them all; probe and demo use\ndestination default, or else the first one given", func(v string) error {
		f.Destinations = append(f.Destinations, v)
		return nil
	})
	fs.StringVar(&f.DestinationsFile, "destinations-file", "", "with --task-service caldav: a `FILE` of destinations, one a line: NAME URL (# starts a comment)")
	fs.StringVar(&f.RedmineURL, "redmine-url", "", "with --task-service redmine: Redmine's base `URL` (for example https://redmine.example.org/)")
	fs.StringVar(&f.RedmineProject, "redmine-project", "", "with --task-service redmine: the project the issues are created in, by its identifier or numeric `ID`")
	fs.StringVar(&f.RedmineField, "redmine-field", redmine.DefaultField, "with --task-service redmine: the `NAME` of the issue custom field that carries each issue's key\n(an administrator makes it once: format string, for all projects, used as a filter)")
	fs.StringVar(&f.RedmineAPIKeyFile, "redmine-api-key-file", "", "with --task-service redmine: a `FILE` holding the API key (default: $"+RedmineAPIKeyEnv+")")
	fs.DurationVar(&f.RedmineLockTTL, "redmine-lock-ttl", 0, "with --task-service redmine: the life of a key's lock in the intent ledger, longer than --call-timeout\n(default: 2 × the call timeout + 10s)")
	fs.DurationVar(&f.RedmineRequestLifetime, "redmine-request-lifetime", 0, "with --task-service redmine: how long after it is sent a create may still land in Redmine, at least --call-timeout.\n"+
		"A create whose outcome is unknown (a timeout, a lost answer, an executor killed) leaves its key in doubt that long:\n"+
		"deliveries meanwhile answer in_doubt and create nothing (default: "+redmine.DefaultRequestLifetime.String()+", or the call timeout when longer;\n"+
		"Redmine and Puma bound no request once it is read)")
	cli.Group(fs, "Task service", "task-service")
	cli.Group(fs, "CalDAV (--task-service caldav)", "caldav-url", "caldav-calendar", "caldav-server", "caldav-user", "caldav-password-file", "caldav-ca-file",
		"destination", "destinations-file")
	cli.Group(fs, "Redmine (--task-service redmine)", redmineFlagNames...)
	cli.Repeatable(fs, "destination")
	return f
}

// ErrUnknown is wrapped by Check for an unknown --task-service.
var ErrUnknown = errors.New("unknown task service")

// Check validates the flags after parsing, and reads the CalDAV password
// or the Redmine API key from its file or the environment; its errors are
// usage errors. A command that creates also calls CheckCallTimeout.
func (f *Config) Check() error {
	for _, k := range kinds {
		if f.Kind == k.name {
			return f.checkKind()
		}
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.name)
	}
	return fmt.Errorf("%w: --task-service %q: %w; known: %s", cli.ErrUsage, f.Kind, ErrUnknown, strings.Join(names, ", "))
}

func (f *Config) checkKind() error {
	caldavSet := f.CalDAVURL != "" || f.CalDAVUser != "" || f.CalDAVPasswordFile != "" || f.CalDAVCalendar != "" || f.CalDAVServer != "" || f.CalDAVCAFile != "" ||
		len(f.Destinations) > 0 || f.DestinationsFile != ""
	if f.Kind != KindCalDAV && caldavSet {
		return fmt.Errorf("%w: --caldav-url, --caldav-user, --caldav-password-file, --caldav-calendar, --caldav-server, --caldav-ca-file, --destination and --destinations-file need --task-service caldav", cli.ErrUsage)
	}
	if f.Kind != KindRedmine {
		if set := f.setRedmineFlags(); len(set) > 0 {
			return fmt.Errorf("%w: --%s: the flags %s need --task-service redmine", cli.ErrUsage, set[0], "--"+strings.Join(redmineFlagNames, ", --"))
		}
	}
	switch f.Kind {
	case KindCalDAV:
		return f.checkCalDAV()
	case KindRedmine:
		return f.checkRedmine()
	}
	return nil
}

// setRedmineFlags names the redmine flags given on the command line (or
// set to a value of their own, for a flag set that was not parsed).
func (f *Config) setRedmineFlags() []string {
	var set []string
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(redmineFlagNames, fl.Name) {
				set = append(set, fl.Name)
			}
		})
	}
	if len(set) == 0 && (f.RedmineURL != "" || f.RedmineProject != "" || f.RedmineAPIKeyFile != "" || f.RedmineLockTTL != 0 || f.RedmineRequestLifetime != 0 ||
		f.RedmineField != "" && f.RedmineField != redmine.DefaultField) {
		set = append(set, "redmine-url")
	}
	return set
}

// checkRedmine checks the redmine flags and reads the API key from its
// file or the environment.
func (f *Config) checkRedmine() error {
	if f.RedmineURL == "" {
		return fmt.Errorf("%w: --task-service redmine needs --redmine-url", cli.ErrUsage)
	}
	if f.RedmineProject == "" {
		return fmt.Errorf("%w: --task-service redmine needs --redmine-project", cli.ErrUsage)
	}
	if strings.TrimSpace(f.RedmineField) == "" {
		return fmt.Errorf("%w: --redmine-field is empty: name the issue custom field that carries the key (default %q)", cli.ErrUsage, redmine.DefaultField)
	}
	if f.RedmineLockTTL < 0 {
		return fmt.Errorf("%w: --redmine-lock-ttl %s is negative", cli.ErrUsage, f.RedmineLockTTL)
	}
	if f.RedmineRequestLifetime < 0 {
		return fmt.Errorf("%w: --redmine-request-lifetime %s is negative", cli.ErrUsage, f.RedmineRequestLifetime)
	}
	if f.RedmineAPIKeyFile != "" {
		b, err := os.ReadFile(f.RedmineAPIKeyFile)
		if err != nil {
			return fmt.Errorf("%w: --redmine-api-key-file: %w", cli.ErrUsage, err)
		}
		f.redmineAPIKey = strings.TrimSpace(string(b))
		if f.redmineAPIKey == "" {
			return fmt.Errorf("%w: --redmine-api-key-file %s is empty", cli.ErrUsage, f.RedmineAPIKeyFile)
		}
	} else if f.getenv != nil {
		f.redmineAPIKey = strings.TrimSpace(f.getenv(RedmineAPIKeyEnv))
	}
	if f.redmineAPIKey == "" {
		return fmt.Errorf("%w: --task-service redmine needs an API key: --redmine-api-key-file FILE or $%s (a user's key, under My account, API access key)", cli.ErrUsage, RedmineAPIKeyEnv)
	}
	// Checks the URL's and the project's form without a request.
	form := f.redmineConfig(refusingLocker{}, time.Second)
	form.RequestLifetime = 0 // checked against the call timeout by CheckCallTimeout
	if _, err := redmine.New(form); err != nil {
		return fmt.Errorf("%w: --redmine-url, --redmine-project, --redmine-field: %w", cli.ErrUsage, err)
	}
	return nil
}

// lockTTL is the redmine lock's lifetime for calls of callTimeout.
func (f *Config) lockTTL(callTimeout time.Duration) time.Duration {
	if f.RedmineLockTTL > 0 {
		return f.RedmineLockTTL
	}
	return 2*callTimeout + 10*time.Second
}

// CheckCallTimeout refuses a redmine lock that could run out while a call
// still runs: its TTL must be longer than the call timeout, or a create
// sent by a holder near the call's end may land after another took the
// lock. A command calls it after Check, with its call timeout; it says
// nothing for other kinds.
func (f *Config) CheckCallTimeout(callTimeout time.Duration) error {
	if f.Kind != KindRedmine {
		return nil
	}
	if ttl := f.lockTTL(callTimeout); ttl <= callTimeout {
		return fmt.Errorf("%w: --redmine-lock-ttl %s is not longer than the call timeout %s: a lock must outlive a lookup and a create", cli.ErrUsage, ttl, callTimeout)
	}
	if l := f.RedmineRequestLifetime; l > 0 && l < callTimeout {
		return fmt.Errorf("%w: --redmine-request-lifetime %s is shorter than the call timeout %s: a create may land as long as the executor waits for its answer", cli.ErrUsage, l, callTimeout)
	}
	return nil
}

// redmineConfig is the adapter's configuration of the flags, with its
// locks and its HTTP timeout, the call timeout (the adapter refuses a lock
// TTL not longer than it).
func (f *Config) redmineConfig(locks taskservice.Locker, callTimeout time.Duration) redmine.Config {
	return redmine.Config{URL: f.RedmineURL, APIKey: f.redmineAPIKey, Project: f.RedmineProject, Field: f.RedmineField,
		Locks: locks, LockTTL: f.lockTTL(callTimeout), RequestLifetime: f.RedmineRequestLifetime, Timeout: callTimeout, MarkKey: f.markKey}
}

// refusingLocker stands for the ledger where the adapter is built only to
// check the flags' form; it never gives a lock.
type refusingLocker struct{}

func (refusingLocker) Lock(context.Context, string, string, time.Duration) (taskservice.Lock, error) {
	return nil, errors.New("no lock is taken while the flags are checked")
}

func (refusingLocker) Doubt(context.Context, string, string, time.Duration) (taskservice.Doubt, error) {
	return taskservice.Doubt{}, errors.New("no in-doubt record is written while the flags are checked")
}

func (refusingLocker) Doubted(context.Context, string, string) (taskservice.Doubt, bool, error) {
	return taskservice.Doubt{}, false, errors.New("no in-doubt record is read while the flags are checked")
}

func (refusingLocker) Settle(context.Context, string, string) error { return nil }

func (f *Config) checkCalDAV() error {
	if err := f.checkCalendarByName(); err != nil {
		return err
	}
	dests, err := f.calDAVDestinations()
	if err != nil {
		return err
	}
	if len(dests) == 0 {
		return fmt.Errorf("%w: --task-service caldav needs a calendar collection: --caldav-url URL (destination default), --caldav-server URL with --caldav-calendar NAME, --destination NAME=URL or --destinations-file FILE", cli.ErrUsage)
	}
	f.caldavDests = dests
	if err := f.readCalDAVLogin(); err != nil {
		return err
	}
	// Checks the URLs' form without a request.
	for _, d := range dests {
		if _, err := caldav.New(caldav.Config{CollectionURL: d.URL}); err != nil {
			return fmt.Errorf("%w: %s: %w", cli.ErrUsage, d.from, err)
		}
	}
	return nil
}

// readCalDAVLogin reads the CalDAV password, from its file or the
// environment, and the roots of --caldav-ca-file, and refuses a password
// without a user.
func (f *Config) readCalDAVLogin() error {
	if f.CalDAVPasswordFile != "" {
		b, err := os.ReadFile(f.CalDAVPasswordFile)
		if err != nil {
			return fmt.Errorf("%w: --caldav-password-file: %w", cli.ErrUsage, err)
		}
		f.calDAVPassword = strings.TrimRight(string(b), "\r\n")
		if f.calDAVPassword == "" {
			return fmt.Errorf("%w: --caldav-password-file %s is empty", cli.ErrUsage, f.CalDAVPasswordFile)
		}
	} else if f.getenv != nil {
		f.calDAVPassword = f.getenv(CalDAVPasswordEnv)
	}
	if f.calDAVPassword != "" && f.CalDAVUser == "" {
		return fmt.Errorf("%w: a CalDAV password is given (--caldav-password-file or $%s) but no --caldav-user", cli.ErrUsage, CalDAVPasswordEnv)
	}
	if f.CalDAVCAFile != "" {
		var err error
		if f.caldavRoots, err = readRoots(f.CalDAVCAFile); err != nil {
			return fmt.Errorf("%w: --caldav-ca-file: %w", cli.ErrUsage, err)
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
	// calendar found, for one found by name); set by Open.
	collection string
}

// checkCalendarByName refuses the flags of destination default given in
// a form that mixes its two ways: the collection's URL (--caldav-url), or
// a calendar's name (--caldav-calendar) on a server (--caldav-server).
func (f *Config) checkCalendarByName() error {
	switch {
	case f.CalDAVCalendar != "" && f.CalDAVURL != "":
		return fmt.Errorf("%w: --caldav-calendar finds destination default by its name, --caldav-url gives its collection: give one; a calendar found by name needs --caldav-server, the server's URL", cli.ErrUsage)
	case f.CalDAVCalendar != "" && f.CalDAVServer == "":
		return fmt.Errorf("%w: --caldav-calendar needs --caldav-server, the URL of the server to find the calendar on", cli.ErrUsage)
	case f.CalDAVServer != "" && f.CalDAVCalendar == "":
		return fmt.Errorf("%w: --caldav-server needs --caldav-calendar, the display name of the calendar to find there; for a calendar collection's URL use --caldav-url", cli.ErrUsage)
	}
	return nil
}

// calDAVDestinations reads the destinations of --caldav-url (or
// --caldav-server with --caldav-calendar), --destination and
// --destinations-file, in that order, and refuses a name given twice or
// not valid.
func (f *Config) calDAVDestinations() ([]caldavDest, error) {
	var dests []caldavDest
	switch {
	case f.CalDAVURL != "":
		dests = append(dests, caldavDest{Name: document.DefaultDestination, URL: f.CalDAVURL, from: "--caldav-url"})
	case f.CalDAVCalendar != "":
		dests = append(dests, caldavDest{Name: document.DefaultDestination, URL: f.CalDAVServer, from: "--caldav-server with --caldav-calendar", calendar: f.CalDAVCalendar})
	}
	for i, v := range f.Destinations {
		// The value is not echoed: a URL may carry a password.
		name, url, ok := strings.Cut(v, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("%w: --destination (number %d): want NAME=URL (for example team=https://dav.example.org/alice/team/)", cli.ErrUsage, i+1)
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
			return nil, fmt.Errorf("%w: --destinations-file: %w", cli.ErrUsage, err)
		}
		dests = append(dests, fromFile...)
	}
	seen := map[string]string{}
	for _, d := range dests {
		if !document.ValidDestination(d.Name) {
			return nil, fmt.Errorf("%w: %s: the destination name must be 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter", cli.ErrUsage, d.from)
		}
		if first, dup := seen[d.Name]; dup {
			return nil, fmt.Errorf("%w: %s: destination %q is already given by %s; each name is one calendar", cli.ErrUsage, d.from, d.Name, first)
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
// (read by Check) besides the system's.
func (f *Config) caldavTransport() *http.Transport {
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

// NeedsNATS reports whether the chosen service is reached over NATS, so
// that Open needs a connection.
func (f *Config) NeedsNATS() bool {
	return f.Kind == KindFake || f.Kind == KindRedmine
}

// NeedsLedger reports whether the chosen service needs the executors'
// intent ledger: one that forgets a key when its task is deleted (caldav,
// redmine), or keeps its per-key locks there (redmine).
func (f *Config) NeedsLedger() bool {
	return f.Kind == KindCalDAV || f.Kind == KindRedmine
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

// DiscoveryConfig reads the password and the roots of --caldav-ca-file as
// Check does and returns the adapter's configuration for the server at
// CalDAVServer, on serve's transport, each request taking at most
// timeout: what executor calendars lists the calendars with. A Config
// without getenv reads the environment.
func (f *Config) DiscoveryConfig(timeout time.Duration) (caldav.Config, error) {
	if f.getenv == nil {
		f.getenv = os.Getenv
	}
	if err := f.readCalDAVLogin(); err != nil {
		return caldav.Config{}, err
	}
	if _, err := caldav.New(caldav.Config{CollectionURL: f.CalDAVServer}); err != nil {
		return caldav.Config{}, fmt.Errorf("%w: --caldav-server: %w", cli.ErrUsage, err)
	}
	return caldav.Config{CollectionURL: f.CalDAVServer, Username: f.CalDAVUser, Password: f.calDAVPassword,
		HTTPClient: &http.Client{Transport: f.caldavTransport(), Timeout: timeout}}, nil
}
