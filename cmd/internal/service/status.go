package service

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// StatusHelp is status's usage.
const StatusHelp = `status [--server URL] [--json] [--service-timeout DURATION]
       [--task-service SERVICE and its flags, as serve takes them]

Prints the task service's three counters, its keys (live, and compacted after their approvals
expired), the tasks deleted by their owners and the request and create records retired, the
store that answered and which instance (micro id, host, pid) served it, the shared consumer's
state and the receipts by outcome. When the service keeps keys in more than one scope, each
scope's counters follow (--json always lists them).
Each part is read on its own: when the task service does not answer, the stream and consumer
figures are still printed and the service's line says that it did not answer (in --json,
"counts" is null and "service_error" says why).

The task service is the one the executors recorded at start (serve writes which service it
calls and where, never a password or an API key, in the bucket sendtwice-topology, key
task-service); with no record, the fake task service. A CalDAV collection or a Redmine project
keeps no counters: status lists its tasks instead, creating nothing (those of the pipeline, and
those the probe and the demo left in their scopes sendtwice-probe and sendtwice-demo). Its
password or API key comes from the usual flags or environment (--caldav-password-file or
$` + CalDAVPasswordEnv + `, --redmine-api-key-file or $` + RedmineAPIKeyEnv + `) and is sent only to a URL given on
the command line (--caldav-url, --redmine-url), never to one the record names; when it is
missing, or the URL is, the service is not called and its line says which flags to add. Flags
that name another service than the record's are refused, naming both.

Exit status: 0 every part was read; 1 some part could not be read (what could be read is
still printed); 2 usage.`

// StatusReport is status's --json output. A part that could not be read
// is null, with the reason in its error member.
type StatusReport struct {
	// TaskService is the service status read: its kind, its name, and
	// where it was taken from (the executors' record, the flags, or the
	// default fake service).
	TaskService *StatusService `json:"task_service"`
	// Tasks sums up the tasks listed by a service that keeps no counters
	// (CalDAV, Redmine); null for the fake service or when not listed.
	Tasks  *audit.ListingSummary `json:"tasks,omitempty"`
	Counts *provider.Counts      `json:"counts"`
	// Keys and Scopes are the service's keys and deleted tasks, and its
	// counters per scope (null and absent when it did not answer).
	Keys          *provider.KeyCounts    `json:"keys"`
	Scopes        []provider.ScopeCounts `json:"scopes,omitempty"`
	Store         *StatusStore           `json:"store,omitempty"`
	ServiceError  string                 `json:"service_error,omitempty"`
	Consumer      *audit.ConsumerState   `json:"consumer"`
	ConsumerError string                 `json:"consumer_error,omitempty"`
	Receipts      map[string]int64       `json:"receipts"`
	ReceiptsError string                 `json:"receipts_error,omitempty"`
}

// StatusService says which task service status read.
type StatusService struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	// From is "record", "flags" or "default".
	From string `json:"from"`
	// RecordedBy and RecordedAt say who recorded the service, and when.
	RecordedBy string    `json:"recorded_by,omitempty"`
	RecordedAt time.Time `json:"recorded_at,omitzero"`
}

// StatusStore says which store answered the fake task service's counters,
// and which instance of the service served it.
type StatusStore struct {
	ID       string `json:"store_id"`
	Instance string `json:"instance"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
}

// failed reports whether some part could not be read.
func (r *StatusReport) failed() bool {
	return r.ServiceError != "" || r.ConsumerError != "" || r.ReceiptsError != ""
}

// StatusConfig is status's flags, as given.
type StatusConfig struct {
	fs             *flag.FlagSet
	conn           *cli.ConnConfig
	asJSON         *bool
	serviceTimeout *time.Duration
	tsf            *Config
}

// StatusFlagsVar defines status's flags on fs.
func StatusFlagsVar(fs *flag.FlagSet) *StatusConfig {
	conn := cli.ConnFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	serviceTimeout := fs.Duration("service-timeout", provider.DefaultTimeout, "how long to wait for the task service's counters (for CalDAV and Redmine, its listing)")
	tsf := FlagsVar(fs)
	return &StatusConfig{fs: fs, conn: conn, asJSON: asJSON, serviceTimeout: serviceTimeout, tsf: tsf}
}

// Status runs status with its parsed flags.
func Status(ctx context.Context, cf *StatusConfig, stdout, stderr io.Writer) error {
	if *cf.serviceTimeout <= 0 {
		cf.fs.Usage()
		return fmt.Errorf("%w: --service-timeout must be positive", cli.ErrUsage)
	}
	if err := cf.tsf.CheckNamed(); err != nil {
		return err
	}
	c, ctx, done, err := cf.conn.OpenWithin(ctx, "executor-status", 30*time.Second)
	if err != nil {
		return err
	}
	defer done()
	nc, js := c.NC, c.JS
	rec, source, err := Settle(ctx, js, cf.tsf, "status", cli.RedactURL(cf.conn.Server), stderr)
	var rep *StatusReport
	switch {
	case errors.Is(err, ErrSecretWithheld):
		// The service is not called; the rest is still read, and the
		// service's line says which flags to add.
		rep = readStatus(ctx, js, nil, *cf.serviceTimeout)
		rep.ServiceError = cf.tsf.SecretHint("status", cli.RedactURL(cf.conn.Server))
	case err != nil:
		return err
	case cf.tsf.Kind == KindFake:
		rep = readStatus(ctx, js, provider.NewClient(nc), *cf.serviceTimeout)
	default:
		rep = readStatus(ctx, js, nil, *cf.serviceTimeout)
		rep.Tasks, rep.ServiceError = listStatus(ctx, cf.tsf, nc, *cf.serviceTimeout)
	}
	rep.TaskService = &StatusService{Kind: cf.tsf.Kind, From: source}
	if rec != nil {
		rep.TaskService.Name, rep.TaskService.RecordedBy, rep.TaskService.RecordedAt = RecordedName(*rec), rec.By, rec.At
	}
	if rep.TaskService.Name == "" && cf.tsf.Kind == KindFake {
		rep.TaskService.Name = "fake task service"
	}
	if *cf.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printStatus(stdout, rep)
	}
	if rep.failed() {
		return cli.ErrSilent
	}
	return nil
}

// readStatus reads each part of the status on its own, so that one part
// that cannot be read does not hide the others.
// svc is the fake task service's client; nil for a service that keeps no
// counters (its tasks are listed apart, listStatus).
func readStatus(ctx context.Context, js jetstream.JetStream, svc *provider.Client, serviceTimeout time.Duration) *StatusReport {
	rep := &StatusReport{}
	if svc != nil {
		sctx, cancel := context.WithTimeout(ctx, serviceTimeout)
		info, err := svc.Info(sctx)
		cancel()
		if err != nil {
			rep.ServiceError = err.Error()
		} else {
			rep.Counts, rep.Keys, rep.Scopes = &info.Counts, &info.Keys, info.Scopes
			rep.Store = &StatusStore{ID: info.StoreID, Instance: info.Instance, Host: info.Host, PID: info.PID}
		}
	}
	if cs, err := audit.Consumer(ctx, js); err != nil {
		rep.ConsumerError = err.Error()
	} else {
		rep.Consumer = &cs
	}
	if rs, err := audit.CountReceipts(ctx, js); err != nil {
		rep.ReceiptsError = err.Error()
	} else {
		rep.Receipts = rs
	}
	return rep
}

// listStatus lists the tasks of a service that keeps no counters (a
// CalDAV collection, a Redmine project), creating nothing; the error is
// the service's line when it cannot.
func listStatus(ctx context.Context, tsf *Config, nc *nats.Conn, timeout time.Duration) (*audit.ListingSummary, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	svc, err := tsf.OpenToList(ctx, nc, timeout)
	if err != nil {
		return nil, err.Error()
	}
	if svc.Lister == nil {
		return nil, "the " + svc.Name + " cannot list its tasks"
	}
	l, err := svc.Lister.ListTasks(ctx)
	if err != nil {
		return nil, err.Error()
	}
	sum := audit.Summarize(l)
	return &sum, ""
}

func printStatus(w io.Writer, rep *StatusReport) {
	if ts := rep.TaskService; ts != nil && ts.Kind != KindFake {
		printListedStatus(w, rep)
		return
	} else if rep.Counts != nil {
		fmt.Fprintf(w, "task service: requests received %d, creates executed %d, tasks existing %d\n",
			rep.Counts.RequestsReceived, rep.Counts.CreatesExecuted, rep.Counts.TasksExisting)
		if k := rep.Keys; k != nil {
			fmt.Fprintf(w, "keys:         live %d, compacted %d; tasks deleted %d; records retired %d\n", k.Live, k.Compacted, k.TasksDeleted, k.RecordsRetired)
		}
		if st := rep.Store; st != nil {
			fmt.Fprintf(w, "store:        %s, answered by instance %s on host %s, pid %d\n", st.ID, st.Instance, st.Host, st.PID)
		}
		// One scope says nothing the totals do not.
		if len(rep.Scopes) > 1 {
			for _, sc := range rep.Scopes {
				fmt.Fprintf(w, "  scope %s: requests received %d, creates executed %d, tasks existing %d; keys live %d, compacted %d; tasks deleted %d\n",
					sc.Scope, sc.RequestsReceived, sc.CreatesExecuted, sc.TasksExisting, sc.KeysLive, sc.KeysCompacted, sc.TasksDeleted)
			}
		}
	} else {
		fmt.Fprintf(w, "task service: did not answer (%s); its counters are unknown\n", rep.ServiceError)
	}
	printStreamStatus(w, rep)
}

// printListedStatus prints the lines of a service that keeps no counters.
func printListedStatus(w io.Writer, rep *StatusReport) {
	ts := rep.TaskService
	name := ts.Name
	if name == "" {
		name = ts.Kind
	}
	from := "from the flags"
	if ts.From == FromRecord {
		from = RecordedBy(topology.TaskService{By: ts.RecordedBy, At: ts.RecordedAt})
		from = strings.TrimSuffix(strings.TrimPrefix(from, " ("), ")")
		if from == "" {
			from = "recorded"
		}
	}
	fmt.Fprintf(w, "task service: %s, %s (%s)\n", ts.Kind, name, from)
	if l := rep.Tasks; l != nil {
		fmt.Fprintf(w, "tasks:        %s\n", l)
		fmt.Fprintf(w, "              it keeps no counters of requests received and creates executed (executor verify audits its tasks)\n")
	} else {
		fmt.Fprintf(w, "tasks:        not read (%s)\n", rep.ServiceError)
	}
	printStreamStatus(w, rep)
}

// printStreamStatus prints the consumer's and the receipts' lines.
func printStreamStatus(w io.Writer, rep *StatusReport) {
	if rep.Consumer != nil {
		fmt.Fprintf(w, "consumer:     pending %d, ack pending %d, redelivered %d\n",
			rep.Consumer.Pending, rep.Consumer.AckPending, rep.Consumer.Redelivered)
	} else {
		fmt.Fprintf(w, "consumer:     could not be read (%s)\n", rep.ConsumerError)
	}
	if rep.Receipts == nil {
		fmt.Fprintf(w, "receipts:     could not be read (%s)\n", rep.ReceiptsError)
		return
	}
	fmt.Fprint(w, "receipts:    ")
	for _, o := range []string{document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered, document.OutcomeInDoubt} {
		fmt.Fprintf(w, " %s %d", o, rep.Receipts[o])
	}
	fmt.Fprintln(w)
}
