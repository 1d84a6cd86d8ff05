package service

// This file keeps the record of the task service the executors call
// (topology.TaskService, in the bucket sendtwice-topology): serve writes it
// at start, and status and verify, run without task service flags, read
// the service it names. The record holds where the service is, never a
// password or an API key: a reader brings its own, and is told exactly
// which flags to add when it has none. Flags given that contradict the
// record are refused, naming both.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// ErrSecretNotRecorded is wrapped by settle's callers for a service whose
// password or API key the reader did not give (it is never recorded).
var ErrSecretNotRecorded = errors.New("a password or an API key is never recorded")

// secretMissingError is a usage error (cli.ErrUsage) that says which flag adds
// the password or API key (ErrSecretNotRecorded).
type secretMissingError struct{ msg string }

func (e *secretMissingError) Error() string   { return e.msg }
func (e *secretMissingError) Unwrap() []error { return []error{cli.ErrUsage, ErrSecretNotRecorded} }

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
		// Every recorded destination: verify audits them all.
		for _, name := range sortedNames(rec.Destinations) {
			if u := rec.Destinations[name]; rec.CalDAVUser != "" && plainToAnotherHost(u) {
				return "", recordedPlainHTTP("the CalDAV collection "+u, "password", "--caldav-url")
			}
		}
		f.CalDAVURL, source = want, FromRecord
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
			if c.name == "redmine-url" && plainToAnotherHost(c.want) {
				return "", recordedPlainHTTP("Redmine at "+c.want, "API key", "--redmine-url")
			}
			*c.value, source = c.want, FromRecord
		}
	}
	if rec.Kind == KindCalDAV && !f.Given("caldav-user") && rec.CalDAVUser != "" {
		f.CalDAVUser = rec.CalDAVUser
	}
	return source, nil
}

// ErrRecordedPlainHTTP is wrapped by settle for a recorded URL that would
// carry the reader's password or API key in clear to another machine.
var ErrRecordedPlainHTTP = errors.New("the record names a plain http URL on another host")

// plainToAnotherHost reports whether u is plain http to a host other than
// this machine's loopback: a secret sent there crosses the network in
// clear.
func plainToAnotherHost(u string) bool {
	p, err := url.Parse(u)
	if err != nil || !strings.EqualFold(p.Scheme, "http") {
		return false
	}
	host := p.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// recordedPlainHTTP refuses to send a secret, in clear, to a URL only the
// record names: anyone who may write the record could point it at a
// machine of theirs. Naming the URL on the command line sends it there.
func recordedPlainHTTP(what, secret, flagName string) error {
	return fmt.Errorf("%w: the executors recorded %s, plain http on another host: the %s is not sent there on the record's word; give %s with that URL to send it, or serve it over https",
		ErrRecordedPlainHTTP, what, secret, flagName)
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
		var parts []string
		for _, name := range sortedNames(rec.Destinations) {
			parts = append(parts, name+" "+rec.Destinations[name])
		}
		what = "the CalDAV collection " + strings.Join(parts, ", ")
		if len(rec.Destinations) > 1 {
			what = "the CalDAV collections " + strings.Join(parts, ", ")
		} else if u := rec.Destinations["default"]; u != "" {
			what = "the CalDAV collection " + u
		}
		if rec.CalDAVUser != "" {
			what += " as user " + rec.CalDAVUser
		}
	case KindRedmine:
		what = fmt.Sprintf("the Redmine project %s at %s (key field %q)", rec.RedmineProject, rec.RedmineURL, rec.RedmineField)
	case KindFake:
		what = "the fake task service over NATS"
	default:
		what = "the task service " + rec.Kind
	}
	return what + RecordedBy(rec)
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

// MissingSecret says, for a service taken from the record, which flag the
// command line must add for the password or API key that is never
// recorded, with the command to run; "" when nothing is missing. Check
// has read the secrets by then (for Redmine, Check itself fails without
// one: MissingSecret is asked first). server is the NATS server, shown
// redacted in the command.
func (f *Config) MissingSecret(command, server string) string {
	var secret, add, env string
	switch f.Kind {
	case KindCalDAV:
		if f.CalDAVUser == "" || f.CalDAVPasswordFile != "" || f.getenv != nil && f.getenv(CalDAVPasswordEnv) != "" {
			return ""
		}
		secret, add, env = "password", "--caldav-password-file FILE", CalDAVPasswordEnv
	case KindRedmine:
		if f.RedmineAPIKeyFile != "" || f.getenv != nil && strings.TrimSpace(f.getenv(RedmineAPIKeyEnv)) != "" {
			return ""
		}
		secret, add, env = "API key", "--redmine-api-key-file FILE", RedmineAPIKeyEnv
	default:
		return ""
	}
	cmd := "executor " + command
	if server != "" {
		cmd += " --server " + server
	}
	return fmt.Sprintf("its %s is never recorded: add %s (or set $%s), as in: %s %s", secret, add, env, cmd, add)
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
// missing secret names the flags to add. It returns the record (nil when
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
		if hint := f.MissingSecret(command, server); hint != "" {
			return &rec, source, &secretMissingError{msg: fmt.Sprintf("%s: %s: the executors call %s; %s", cli.ErrUsage, command, describeRecord(rec), hint)}
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
