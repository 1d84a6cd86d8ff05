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

// statusReport is status's --json output.
type statusReport struct {
	Counts   provider.Counts     `json:"counts"`
	Consumer audit.ConsumerState `json:"consumer"`
	Receipts map[string]int64    `json:"receipts"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "status [--server URL] [--json]\n\nPrints the task service's three counters, the shared consumer's state and the receipts by outcome.", stderr)
	conn := cli.ConnFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
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
	var rep statusReport
	if rep.Counts, err = provider.NewClient(nc).Stats(ctx); err != nil {
		return fmt.Errorf("asking the task service for its counters: %w", err)
	}
	if rep.Consumer, err = audit.Consumer(ctx, js); err != nil {
		return err
	}
	if rep.Receipts, err = audit.CountReceipts(ctx, js); err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	fmt.Fprintf(stdout, "task service: requests received %d, creates executed %d, tasks existing %d\n",
		rep.Counts.RequestsReceived, rep.Counts.CreatesExecuted, rep.Counts.TasksExisting)
	fmt.Fprintf(stdout, "consumer:     pending %d, ack pending %d, redelivered %d\n",
		rep.Consumer.Pending, rep.Consumer.AckPending, rep.Consumer.Redelivered)
	fmt.Fprint(stdout, "receipts:    ")
	for _, o := range []string{document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict, document.OutcomeRejected, document.OutcomeDeadLettered} {
		fmt.Fprintf(stdout, " %s %d", o, rep.Receipts[o])
	}
	fmt.Fprintln(stdout)
	return nil
}
