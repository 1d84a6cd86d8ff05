package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/provider"
)

const statusHelp = `status [--server URL] [--json] [--service-timeout DURATION]

Prints the task service's three counters, its keys (live, and compacted after their approvals
expired) and the tasks deleted by their owners, the shared consumer's state and the receipts
by outcome. When the service keeps keys in more than one scope, each scope's counters follow.
Each part is read on its own: when the task service does not answer, the stream and consumer
figures are still printed and the service's line says that it did not answer (in --json,
"counts" is null and "service_error" says why).

Exit status: 0 every part was read; 1 some part could not be read (what could be read is
still printed); 2 usage.`

// statusReport is status's --json output. A part that could not be read
// is null, with the reason in its error member.
type statusReport struct {
	Counts *provider.Counts `json:"counts"`
	// Keys and Scopes are the service's keys and deleted tasks, and its
	// counters per scope (null and absent when it did not answer).
	Keys          *provider.KeyCounts    `json:"keys"`
	Scopes        []provider.ScopeCounts `json:"scopes,omitempty"`
	ServiceError  string                 `json:"service_error,omitempty"`
	Consumer      *audit.ConsumerState   `json:"consumer"`
	ConsumerError string                 `json:"consumer_error,omitempty"`
	Receipts      map[string]int64       `json:"receipts"`
	ReceiptsError string                 `json:"receipts_error,omitempty"`
}

// failed reports whether some part could not be read.
func (r *statusReport) failed() bool {
	return r.ServiceError != "" || r.ConsumerError != "" || r.ReceiptsError != ""
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", statusHelp, stderr)
	conn := cli.ConnFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	serviceTimeout := fs.Duration("service-timeout", provider.DefaultTimeout, "how long to wait for the task service's counters")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *serviceTimeout <= 0 {
		fs.Usage()
		return fmt.Errorf("%w: --service-timeout must be positive", errUsage)
	}
	nc, err := conn.Connect("executor-status", nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	rep := readStatus(ctx, js, provider.NewClient(nc), *serviceTimeout)
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printStatus(stdout, rep)
	}
	if rep.failed() {
		return errSilent
	}
	return nil
}

// readStatus reads each part of the status on its own, so that one part
// that cannot be read does not hide the others.
func readStatus(ctx context.Context, js jetstream.JetStream, svc *provider.Client, serviceTimeout time.Duration) *statusReport {
	rep := &statusReport{}
	sctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	info, err := svc.Info(sctx)
	cancel()
	if err != nil {
		rep.ServiceError = err.Error()
	} else {
		rep.Counts, rep.Keys, rep.Scopes = &info.Counts, &info.Keys, info.Scopes
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

func printStatus(w io.Writer, rep *statusReport) {
	if rep.Counts != nil {
		fmt.Fprintf(w, "task service: requests received %d, creates executed %d, tasks existing %d\n",
			rep.Counts.RequestsReceived, rep.Counts.CreatesExecuted, rep.Counts.TasksExisting)
		if k := rep.Keys; k != nil {
			fmt.Fprintf(w, "keys:         live %d, compacted %d; tasks deleted %d\n", k.Live, k.Compacted, k.TasksDeleted)
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
	for _, o := range []string{document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered} {
		fmt.Fprintf(w, " %s %d", o, rep.Receipts[o])
	}
	fmt.Fprintln(w)
}
