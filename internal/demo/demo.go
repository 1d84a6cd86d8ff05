package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/publish"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

// ErrMismatch is returned when a row differs from what it must be.
var ErrMismatch = errors.New("demo: a row differs from what is expected")

// Sender publishes an envelope to the server at url and returns its receipt.
// The command line passes one that runs a separate publisher process.
type Sender func(ctx context.Context, url string, envelope []byte) (*document.Receipt, error)

// Options configure a run.
type Options struct {
	// Dir is the working directory; empty means a new temporary one,
	// removed at the end.
	Dir string
	// Out receives the table.
	Out io.Writer
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger
	// Process sends as a separate OS process; nil sends in this process.
	Process Sender
	// Service, when set, is a real task service that the executor calls
	// instead of the fake one, which is then stopped (see RealService).
	Service *RealService
}

// RealService is a task service other than the fake one, such as a CalDAV
// collection. It keeps no counters, so the story is told with what it can
// show: the receipts, and the tasks it lists after each step. The story
// uses intent ids of its own, new in every run ("demo-<run id>-intent-…"),
// so that it can be told again against the same service.
type RealService struct {
	// Name says which service it is ("CalDAV collection https://…").
	Name string
	// Service is what the executor calls.
	Service taskservice.Service
	// List reads the tasks the service holds, from the service itself.
	List func(ctx context.Context) (Listing, error)
	// LoseReply arranges that the answer to the next create is lost after
	// the service has acted; it returns what disarms it.
	LoseReply func(ctx context.Context) (disarm func(context.Context) error, err error)
	// CallTimeout bounds each call; zero means 10 seconds.
	CallTimeout time.Duration
}

// Listing is what a real service lists.
type Listing struct {
	// Tasks are the tasks made through the contract, with their keys.
	Tasks []ListedTask
	// All counts every task the service holds, those of others included.
	All int
}

// ListedTask is one task a real service lists.
type ListedTask struct {
	IntentID, TaskID, RequestDigest string
}

// Row is one line of the table.
type Row struct {
	Step, Intent, Content string
	Receipt, Counts       string
	Want                  string
	OK                    bool
}

type run struct {
	opts  Options
	stack *embedded.Stack
	nc    *nats.Conn
	js    jetstream.JetStream
	svc   *provider.Client
	dir   string
	rows  []Row
	key   *sign.Key
	// intents are the intent ids of a run against a real service, in the
	// order A, B, C.
	intents []string
}

// Run plays the story and prints the table. It returns the rows and
// ErrMismatch if any row differs.
func Run(ctx context.Context, opts Options) ([]Row, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sendtwice-demo-")
		if err != nil {
			return nil, fmt.Errorf("demo: making a working directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	stack, err := embedded.StartStack(embedded.StackOptions{Dir: dir, Port: -1, AllowFaults: true, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	taskSvc, callTimeout := taskservice.Service(nil), time.Second
	if opts.Service != nil {
		// Nothing may reach the fake task service in this run.
		if err := stack.StopService(); err != nil {
			return nil, fmt.Errorf("demo: stopping the fake task service: %w", err)
		}
		taskSvc, callTimeout = opts.Service.Service, opts.Service.CallTimeout
		if callTimeout <= 0 {
			callTimeout = 10 * time.Second
		}
	}
	nc, err := nats.Connect(stack.URL(), nats.Name("demo"))
	if err != nil {
		return nil, fmt.Errorf("demo: connecting: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	r := &run{opts: opts, stack: stack, nc: nc, js: js, svc: provider.NewClient(nc), dir: dir}

	// One executor instance, with short timeouts so that a dropped reply
	// comes back within a second or two.
	exConn, err := nats.Connect(stack.URL(), nats.Name("demo-executor"))
	if err != nil {
		return nil, fmt.Errorf("demo: connecting the executor: %w", err)
	}
	defer exConn.Close()
	if taskSvc == nil {
		taskSvc = provider.NewClient(exConn).TaskService()
	}
	// The reviewer signs with a throwaway key that only this run trusts.
	key, err := sign.Generate()
	if err != nil {
		return nil, err
	}
	keys, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, key.Public()))
	if err != nil {
		return nil, err
	}
	r.key = key
	ex, err := executor.New(exConn, executor.Config{
		Gate:        &gate.Checker{Keys: keys},
		TaskService: taskSvc,
		ID:          "exec-1",
		Concurrency: 4,
		CallTimeout: callTimeout,
		Topology:    topology.Config{AckWait: 3 * time.Second, MaxDeliver: 5, NakDelay: 100 * time.Millisecond},
		Logger:      opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	exCtx, stopEx := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- ex.Run(exCtx, ready) }()
	defer func() { stopEx(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	if opts.Service != nil {
		if err := r.storyReal(ctx); err != nil {
			return r.rows, err
		}
		r.printReal()
	} else {
		if err := r.story(ctx); err != nil {
			return r.rows, err
		}
		r.print()
	}
	for _, row := range r.rows {
		if !row.OK {
			return r.rows, ErrMismatch
		}
	}
	return r.rows, nil
}

func (r *run) story(ctx context.Context) error {
	now := time.Now().UTC().Truncate(time.Second)
	seed, err := scenario.BuildSigned(r.key, now, time.Hour)
	if err != nil {
		return err
	}
	c, err := scenario.ApproveWith(seed.Original.Candidate, "task-request-0004", "intent-0003", scenario.Title,
		approve.Options{ID: "approval-0004", Key: r.key, At: now, Lifetime: time.Hour})
	if err != nil {
		return err
	}
	process := r.opts.Process
	if process == nil {
		process = r.sendHere
	}

	// 1: the first publisher process sends A.
	rc, err := process(ctx, r.stack.URL(), seed.Original.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 1: %w", err)
	}
	firstTask := deref(rc.TaskID)
	r.row("1", "A", "original", rc, "created", "1, 1, 1", "")

	// 2: the service restarts; a second publisher process sends A again.
	if err := r.restartService(filepath.Join(r.dir, "provider")); err != nil {
		return err
	}
	rc, err = process(ctx, r.stack.URL(), seed.Original.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 2: %w", err)
	}
	r.row("2", "A (second publisher process, service restarted)", "original", rc, "replayed", "2, 1, 1", firstTask)

	// 3: the same intent with changed content and its own approval.
	rc, err = r.sendHere(ctx, r.stack.URL(), seed.Changed.Envelope())
	if err != nil {
		return fmt.Errorf("demo: step 3: %w", err)
	}
	r.row("3", "A", "changed, with its own approval", rc, "idempotency_conflict", "3, 1, 1", firstTask)

	// A fresh service: A, then B with the same content.
	if err := r.restartService(filepath.Join(r.dir, "provider-fresh")); err != nil {
		return err
	}
	ra, err := r.sendHere(ctx, r.stack.URL(), seed.Original.Envelope())
	if err != nil {
		return fmt.Errorf("demo: fresh service, A: %w", err)
	}
	rb, err := r.sendHere(ctx, r.stack.URL(), seed.NewIntent.Envelope())
	if err != nil {
		return fmt.Errorf("demo: fresh service, B: %w", err)
	}
	r.rows = append(r.rows, Row{
		Step: "fresh service", Intent: "A, then B", Content: "same content",
		Receipt: ra.Outcome + ", " + rb.Outcome, Counts: counts(rb), Want: "created, created; 2, 2, 2",
		OK: ra.Outcome == document.OutcomeCreated && rb.Outcome == document.OutcomeCreated && counts(rb) == "2, 2, 2" &&
			deref(ra.TaskID) != deref(rb.TaskID),
	})

	// Tampered messages: each rejected at its check; the service sees nothing.
	before, err := r.svc.Stats(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the counters: %w", err)
	}
	var checks []string
	ok := true
	for _, t := range tamperedCases(seed) {
		rc, err := r.sendHere(ctx, r.stack.URL(), t.Envelope)
		if err != nil {
			return fmt.Errorf("demo: tampered %s: %w", t.Name, err)
		}
		got := ""
		if rc.Rejection != nil {
			got = rc.Rejection.Check
		}
		checks = append(checks, got)
		ok = ok && rc.Outcome == document.OutcomeRejected && got == t.Check && rc.Counts == nil
	}
	after, err := r.svc.Stats(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the counters: %w", err)
	}
	r.rows = append(r.rows, Row{
		Step: fmt.Sprintf("%d tampered messages", len(checks)), Intent: "—", Content: "—",
		Receipt: "rejected at " + strings.Join(uniq(checks), ", "),
		Counts:  fmt.Sprintf("%s → %s", fmtCounts(before), fmtCounts(after)),
		Want:    "rejected at their checks; requests unchanged",
		OK:      ok && before == after,
	})

	// One publish whose reply the service drops: the executor's call times
	// out, the message comes back, and the service replays.
	if err := r.restartService(filepath.Join(r.dir, "provider-dropped-reply")); err != nil {
		return err
	}
	if _, err := r.svc.ArmFault(ctx, 1); err != nil {
		return fmt.Errorf("demo: arming the fault switch: %w", err)
	}
	rc, err = r.sendHere(ctx, r.stack.URL(), c.Envelope())
	if err != nil {
		return fmt.Errorf("demo: dropped reply: %w", err)
	}
	row := r.row("one publish, reply dropped", "C", "original", rc, "replayed", "2, 1, 1", "")
	r.rows[len(r.rows)-1].Receipt = fmt.Sprintf("(delivery %d) %s", rc.Delivery.Delivered, row.Receipt)
	if rc.Delivery.Delivered < 2 {
		r.rows[len(r.rows)-1].OK = false
	}
	return nil
}

// tamperedCases are the seed's tampered messages and one approval edited
// after it was signed.
func tamperedCases(seed *scenario.Seed) []scenario.Tampered {
	return append(seed.TamperedCases(), scenario.Tampered{
		Name: "approval-edited-after-signing", Check: gate.CheckSignature,
		Envelope: scenario.Approved{Candidate: seed.Original.Candidate, Request: seed.Original.Request,
			Approval: bytes.Replace(seed.Original.Approval, []byte(`"approved_by": "`+scenario.Reviewer+`"`), []byte(`"approved_by": "someone-else"`), 1)}.Envelope(),
	})
}

func (r *run) restartService(dir string) error {
	if err := r.stack.StopService(); err != nil {
		return fmt.Errorf("demo: stopping the task service: %w", err)
	}
	if err := r.stack.StartService(dir); err != nil {
		return fmt.Errorf("demo: starting the task service: %w", err)
	}
	return nil
}

// sendHere publishes from this process and waits for the receipt.
func (r *run) sendHere(ctx context.Context, _ string, env []byte) (*document.Receipt, error) {
	return SendAndWait(ctx, r.js, env, 20*time.Second)
}

// SendAndWait publishes env and waits up to wait for its receipt.
func SendAndWait(ctx context.Context, js jetstream.JetStream, env []byte, wait time.Duration) (*document.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sent, err := publish.Send(ctx, js, env)
	if err != nil {
		return nil, err
	}
	rc, err := publish.WaitReceipt(ctx, js, sent.IntentID, sent.StreamSeq)
	if err != nil {
		return nil, err
	}
	return rc.Receipt, nil
}

func (r *run) row(step, intent, content string, rc *document.Receipt, outcome, wantCounts, wantTask string) Row {
	got := rc.Outcome
	if rc.TaskID != nil {
		got += " " + *rc.TaskID
	}
	ok := rc.Outcome == outcome && counts(rc) == wantCounts && (wantTask == "" || deref(rc.TaskID) == wantTask)
	want := outcome + "; " + wantCounts
	if wantTask != "" {
		want = outcome + " " + wantTask + "; " + wantCounts
	}
	row := Row{Step: step, Intent: intent, Content: content, Receipt: got, Counts: counts(rc), Want: want, OK: ok}
	r.rows = append(r.rows, row)
	return row
}

func (r *run) print() {
	tw := tabwriter.NewWriter(r.opts.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tintent\tcontent\treceipt\trequests, creates, tasks\tcheck")
	for _, row := range r.rows {
		mark := "ok"
		if !row.OK {
			mark = "DIFFERS, want " + row.Want
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Step, row.Intent, row.Content, row.Receipt, row.Counts, mark)
	}
	tw.Flush()
}

func counts(rc *document.Receipt) string {
	if rc.Counts == nil {
		return "—"
	}
	return fmt.Sprintf("%d, %d, %d", rc.Counts.RequestsReceived, rc.Counts.CreatesExecuted, rc.Counts.TasksExisting)
}

func fmtCounts(c provider.Counts) string {
	return fmt.Sprintf("%d, %d, %d", c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
