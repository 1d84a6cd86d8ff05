package service

// This file keeps the record of the task service the executors call
// (topology.TaskService, in the bucket sendtwice-topology): serve writes it
// at start, and status and verify, run without task service flags, read
// the service it names. The record holds where the service is, never a
// password or an API key: a reader brings its own, and sends it only to a
// URL given on its own command line, never to one the record names (anyone
// who may write the record could name a machine of theirs). A reader with
// a secret and no URL of its own is told exactly which flags to add. Flags
// given that contradict the record are refused, naming both.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/redact"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// ErrContradictsRecord is wrapped by settle for a flag that names another
// service than the one the executors recorded.
var ErrContradictsRecord = errors.New("the flags contradict the executors' record of their task service")

// ErrSecretWithheld is wrapped by Settle for a service that is not called:
// its password or API key is missing (it is never recorded), or it would
// go to a URL only the record names.
var ErrSecretWithheld = errors.New("the password or API key is missing, or would go to a URL not given on the command line")

// secretWithheldError is a usage error (cli.ErrUsage, ErrSecretWithheld)
// that says which flags to add.
type secretWithheldError struct{ msg string }

func (e *secretWithheldError) Error() string   { return e.msg }
func (e *secretWithheldError) Unwrap() []error { return []error{cli.ErrUsage, ErrSecretWithheld} }

// recordOf is what serve records of the service it opened: the kind and
// where it is, no secret.
func (f *Config) recordOf(by, name string) topology.TaskService {
	ts := topology.TaskService{Kind: f.Kind, Name: name, By: by, At: time.Now().UTC().Truncate(time.Second)}
	switch f.Kind {
	case KindCalDAV:
		// One entry per destination: the collection Open used (a
		// calendar found by name is recorded by its URL).
		ts.Destinations = map[string]string{}
		for _, d := range f.caldavDests {
			u := d.collection
			if u == "" {
				u = d.URL
			}
			ts.Destinations[d.Name] = withoutUserinfo(u)
		}
		ts.CalDAVUser = f.CalDAVUser
	case KindRedmine:
		ts.RedmineURL, ts.RedmineProject, ts.RedmineField = f.RedmineURL, f.RedmineProject, f.RedmineField
	}
	return ts
}

// Given reports whether the flag name was given on the command line.
func (f *Config) Given(name string) bool {
	set := false
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	}
	return set
}

// recordSource says where a command took its task service from.
const (
	FromFlags   = "flags"
	FromRecord  = "record"
	FromDefault = "default"
)

// settle takes what the command line left out from the executors' record:
// the kind, the collection or project, the user, the custom field. A flag
// given that names another service than the record's is refused, naming
// both. It returns where the service was taken from (FromRecord when the
// record supplied it, FromFlags when the flags named it all).
func (f *Config) settle(rec topology.TaskService) (string, error) {
	recorded := describeRecord(rec)
	contradict := func(flagName, value, want string) error {
		return fmt.Errorf("%w: --%s %s, but the executors recorded that they call %s; leave --%s out to use the record, or run serve with the flags you mean",
			ErrContradictsRecord, flagName, value, recorded, flagName)
	}
	if f.Given("task-service") && f.Kind != rec.Kind {
		return "", contradict("task-service", f.Kind, rec.Kind)
	}
	source := FromFlags
	if !f.Given("task-service") {
		f.Kind, source = rec.Kind, FromRecord
	}
	switch rec.Kind {
	case KindCalDAV:
		want := rec.Destinations["default"]
		if f.Given("caldav-url") {
			if sameCollection(f.CalDAVURL, want) {
				break
			}
			return "", contradict("caldav-url", redact.URL(f.CalDAVURL), want)
		}
		if f.Given("caldav-calendar") || f.Given("destination") || f.Given("destinations-file") {
			// The flags name the destinations: they are checked as given.
			break
		}
		// Every recorded destination: verify audits them all, reached
		// without a password (SecretHint).
		f.CalDAVURL, source, f.urlFromRecord = want, FromRecord, true
		for _, name := range sortedNames(rec.Destinations) {
			if name != "default" {
				f.Destinations = append(f.Destinations, name+"="+rec.Destinations[name])
			}
		}
	case KindRedmine:
		for _, c := range []struct {
			name   string
			value  *string
			want   string
			equals func(a, b string) bool
		}{
			{"redmine-url", &f.RedmineURL, rec.RedmineURL, func(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }},
			{"redmine-project", &f.RedmineProject, rec.RedmineProject, func(a, b string) bool { return a == b }},
			{"redmine-field", &f.RedmineField, rec.RedmineField, func(a, b string) bool { return a == b }},
		} {
			if c.want == "" {
				continue
			}
			if f.Given(c.name) {
				if !c.equals(*c.value, c.want) {
					// A URL given may carry a secret: it is shown redacted.
					shown := *c.value
					if c.name == "redmine-url" {
						shown = redact.URL(shown)
					}
					return "", contradict(c.name, shown, c.want)
				}
				continue
			}
			// A URL taken from the record gets no API key (SecretHint).
			f.urlFromRecord = f.urlFromRecord || c.name == "redmine-url"
			*c.value, source = c.want, FromRecord
		}
	}
	if rec.Kind == KindCalDAV && !f.Given("caldav-user") && rec.CalDAVUser != "" {
		f.CalDAVUser = rec.CalDAVUser
	}
	return source, nil
}

// withoutUserinfo is u without a user or password in it: a record or an
// error never holds a password.
func withoutUserinfo(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}

// sameCollection compares two collection URLs as the adapter normalizes
// them.
func sameCollection(a, b string) bool {
	na, errA := caldav.New(caldav.Config{CollectionURL: withoutUserinfo(a)})
	nb, errB := caldav.New(caldav.Config{CollectionURL: withoutUserinfo(b)})
	if errA != nil || errB != nil {
		return a == b
	}
	return na.CollectionURL() == nb.CollectionURL()
}

// describeRecord says in words which service a record names, who recorded
// it and when.
func describeRecord(rec topology.TaskService) string {
	var what string
	switch rec.Kind {
	case KindCalDAV:
		what = "the " + RecordedName(rec)
		if rec.CalDAVUser != "" {
			what += " as user " + rec.CalDAVUser
		}
	case KindRedmine:
		what = fmt.Sprintf("the %s (key field %q)", RecordedName(rec), rec.RedmineField)
	case KindFake:
		what = "the fake task service over NATS"
	default:
		what = "the task service " + rec.Kind
	}
	return what + RecordedBy(rec)
}

// RecordedName names the CalDAV collections or the Redmine project a
// record names by the URLs it holds, as serve names them, never by the
// record's own name, which whoever wrote the record chose; for another
// kind, the record's name.
func RecordedName(rec topology.TaskService) string {
	switch rec.Kind {
	case KindCalDAV:
		if u, ok := rec.Destinations["default"]; ok && len(rec.Destinations) == 1 {
			return "CalDAV collection " + u
		}
		var parts []string
		for _, name := range sortedNames(rec.Destinations) {
			parts = append(parts, name+" "+rec.Destinations[name])
		}
		if len(parts) > 1 {
			return "CalDAV collections " + strings.Join(parts, ", ")
		}
		return "CalDAV collection " + strings.Join(parts, ", ")
	case KindRedmine:
		return fmt.Sprintf("Redmine project %s at %s", rec.RedmineProject, rec.RedmineURL)
	}
	return rec.Name
}

// RecordedBy says " (recorded by executor X at T)".
func RecordedBy(rec topology.TaskService) string {
	var parts []string
	if rec.By != "" {
		parts = append(parts, "by executor "+rec.By)
	}
	if !rec.At.IsZero() {
		parts = append(parts, "at "+rec.At.Format(time.RFC3339))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (recorded " + strings.Join(parts, " ") + ")"
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// SecretHint says, for a service taken from the record, why the command
// sends it no password or API key, and which flags to add; "" when nothing
// stops it. A secret goes only to a URL given on the command line: a URL
// only the record names is reached without one, or not at all when the
// service needs one (Redmine; CalDAV with a user) or the command was given
// one (a flag or the environment), which then stays with the command.
// server is the NATS server, shown redacted in the command to run.
func (f *Config) SecretHint(command, server string) string {
	var secret, urlFlag, meant, fileFlag, env string
	var given, needed bool
	switch f.Kind {
	case KindCalDAV:
		secret, urlFlag, meant, fileFlag, env = "password", "--caldav-url URL", "the collection you mean", "--caldav-password-file FILE", CalDAVPasswordEnv
		given = f.CalDAVPasswordFile != "" || f.getenv != nil && f.getenv(env) != ""
		needed = f.CalDAVUser != ""
	case KindRedmine:
		secret, urlFlag, meant, fileFlag, env = "API key", "--redmine-url URL", "the Redmine you mean", "--redmine-api-key-file FILE", RedmineAPIKeyEnv
		given = f.RedmineAPIKeyFile != "" || f.getenv != nil && strings.TrimSpace(f.getenv(env)) != ""
		needed = true
	default:
		return ""
	}
	var add []string
	if f.urlFromRecord && (given || needed) {
		add = append(add, urlFlag)
	}
	if needed && !given {
		add = append(add, fileFlag)
	}
	if len(add) == 0 {
		return ""
	}
	cmd := "executor " + command
	if server != "" {
		cmd += " --server " + server
	}
	cmd += " " + strings.Join(add, " ")
	if !f.urlFromRecord {
		return fmt.Sprintf("its %s is never recorded: add %s (or set $%s), as in: %s", secret, fileFlag, env, cmd)
	}
	if given {
		return fmt.Sprintf("its %s is sent only to a URL given on the command line, never to one a record names: add %s, %s, as in: %s", secret, urlFlag, meant, cmd)
	}
	return fmt.Sprintf("its %s is never recorded, and is sent only to a URL given on the command line: add %s and %s (or set $%s), as in: %s",
		secret, urlFlag, fileFlag, env, cmd)
}

// readServiceRecord reads the executors' record of their task service; ok
// is false when there is none.
func readServiceRecord(ctx context.Context, js jetstream.JetStream) (topology.TaskService, bool, error) {
	rec, err := topology.ReadTaskService(ctx, js)
	if errors.Is(err, topology.ErrNoTaskService) {
		return topology.TaskService{}, false, nil
	}
	if err != nil {
		return topology.TaskService{}, false, err
	}
	return rec, true, nil
}

// CheckNamed is what status and verify check before they connect: the
// flags, when they name their service; flags that leave the service to the
// executors' record are checked by Settle, once it is read.
func (f *Config) CheckNamed() error {
	if !f.Given("task-service") {
		return nil
	}
	return f.Check()
}

// Settle is what status and verify do with their task service
// flags once connected: take the executors' record for what the flags
// leave out (refusing flags that contradict it), then check the flags and
// read the password or API key. The first error is a usage error; a
// secret missing, or not to be sent to the record's URL, names the flags
// to add (ErrSecretWithheld). It returns the record (nil when
// none) and where the service was taken from; when it falls back to the
// fake service, it says so on stderr (noRecordNote).
func Settle(ctx context.Context, js jetstream.JetStream, f *Config, command, server string, stderr io.Writer) (*topology.TaskService, string, error) {
	rec, source, err := settle(ctx, js, f, command, server)
	if err == nil && source == FromDefault {
		fmt.Fprintln(stderr, noRecordNote(command))
	}
	return rec, source, err
}

func settle(ctx context.Context, js jetstream.JetStream, f *Config, command, server string) (*topology.TaskService, string, error) {
	rec, ok, err := readServiceRecord(ctx, js)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", command, err)
	}
	source := FromDefault
	if f.Given("task-service") {
		source = FromFlags
	}
	if ok {
		if source, err = f.settle(rec); err != nil {
			return nil, "", fmt.Errorf("%w: %w", cli.ErrUsage, err)
		}
	}
	if source == FromRecord {
		if hint := f.SecretHint(command, server); hint != "" {
			return &rec, source, &secretWithheldError{msg: fmt.Sprintf("%s: %s: the executors call %s; %s", cli.ErrUsage, command, describeRecord(rec), hint)}
		}
	}
	if err := f.Check(); err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, source, nil
	}
	return &rec, source, nil
}

// RecordAtStart writes the record of the service serve opened. With
// provision it makes the bucket if need be, as provisioning does; without
// (--no-provision, an executor that may not write the bucket), a failure
// is logged and serving goes on. A record that named another service is
// replaced, and the log says so.
func RecordAtStart(ctx context.Context, js jetstream.JetStream, f *Config, provision bool, replicas int, id, name string, log *slog.Logger) error {
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	rec := f.recordOf(id, name)
	if prev, ok, err := readServiceRecord(ctx, js); err == nil && ok && (prev.Kind != rec.Kind || prev.Name != rec.Name) {
		log.Warn("the executors' record of their task service named another service; this executor records its own",
			"recorded", describeRecord(prev), "now", describeRecord(rec))
	}
	if err := topology.RecordTaskService(ctx, js, provision, replicas, rec); err != nil {
		if !provision {
			log.Warn("the task service is not recorded (--no-provision): status and verify need its flags", "err", err)
			return nil
		}
		return err
	}
	log.Info("task service recorded for status and verify", "bucket", topology.RecordBucket, "key", topology.TaskServiceKey, "kind", rec.Kind)
	return nil
}

// noRecordNote is what status and verify say when neither the flags nor a
// record name the task service: they use the fake service, which may not be
// the one the executors call.
func noRecordNote(command string) string {
	return "executor " + command + ": no record of the executors' task service (serve writes it at start; one that may not write the bucket " +
		topology.RecordBucket + " does not) and no --task-service: using the fake task service; for CalDAV or Redmine, add --task-service and its flags"
}
