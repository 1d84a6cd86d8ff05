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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
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
	// Service, when set, is a real task service (such as a CalDAV
	// collection) that the executor calls instead of the fake one, which
	// is then stopped. It keeps no counters, so the story is told with
	// what it can show: the receipts, and the tasks its adapter lists
	// (taskservice.Lister) after each step; its adapter deletes a task as
	// its owner would (taskservice.Deleter), and it loses a reply
	// (LoseReply). The story uses intent ids of its own, new in every run
	// ("demo-<run id>-intent-…"), so that it can be told again against the
	// same service.
	Service *service.Service
	// CallTimeout bounds each call to Service; zero means 10 seconds.
	CallTimeout time.Duration

	// KeepTasks leaves the run's tasks in a real service at its end; by
	// default the run deletes them, so that the service lists what it
	// listed before the run.
	KeepTasks bool

	// skipDelete leaves out the owner's delete of step 4, for the test
	// that sees the row differ without it.
	skipDelete bool
}

// Scope is the caller scope of the story's requests against a real
// service, and TitlePrefix starts their titles, so that its tasks are told
// apart from a pipeline's (verify lists them apart).
const (
	Scope       = audit.DemoScope
	TitlePrefix = audit.DemoTitlePrefix
)

// destinationOf is what the story's requests are for against the real
// service svc: its provider and destination, the fake task service's
// provider and the default destination when it names none.
func destinationOf(svc *service.Service) gate.Destination {
	d := gate.Destination{Provider: svc.Provider, Name: svc.Destination}
	if d.Provider == "" {
		d.Provider = document.ProviderFake
	}
	if d.Name == "" {
		d.Name = document.DefaultDestination
	}
	return d
}

// Row is one line of the table.
type Row struct {
	Step, Intent, Content string
	Receipt, Counts       string
	Want                  string
	OK                    bool
	// Shows says in plain words what the row shows, printed under the
	// table.
	Shows string
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
	// order A, B, C; before is how many tasks it listed before the run,
	// and cleanup what the run did with its tasks at the end.
	intents []string
	before  int
	cleanup struct {
		deleted, kept int
		failed        []string
	}
	// stops end what the run started, last first.
	stops []func()
}

// Run plays the story and prints the table. It returns the rows and
// ErrMismatch if any row differs.
func Run(ctx context.Context, opts Options) ([]Row, error) {
	r := &run{opts: withDefaults(opts)}
	defer r.stop()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if err := r.tell(ctx); err != nil {
		return r.rows, err
	}
	for _, row := range r.rows {
		if !row.OK {
			return r.rows, ErrMismatch
		}
	}
	return r.rows, nil
}

func withDefaults(opts Options) Options {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return opts
}

// onStop has stop end f, before what was started earlier.
func (r *run) onStop(f func()) { r.stops = append(r.stops, f) }

// stop ends what the run started, last first.
func (r *run) stop() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
	r.stops = nil
}

// start sets the stage: a working directory, the embedded stack, the
// demo's own connection, the reviewer's key and one executor that consumes.
func (r *run) start(ctx context.Context) error {
	if err := r.workDir(); err != nil {
		return err
	}
	stack, err := embedded.StartStack(embedded.StackOptions{Dir: r.dir, Port: -1, AllowFaults: true, Logger: r.opts.Logger, Purpose: purpose})
	if err != nil {
		return err
	}
	r.stack = stack
	r.onStop(func() { _ = stack.Close() })
	if err := r.connect(); err != nil {
		return err
	}
	keys, err := r.reviewerKey()
	if err != nil {
		return err
	}
	return r.startExecutor(ctx, keys)
}

// workDir uses Options.Dir, or a new temporary directory removed at the end.
func (r *run) workDir() error {
	if r.opts.Dir != "" {
		r.dir = r.opts.Dir
		return nil
	}
	d, err := os.MkdirTemp("", "sendtwice-demo-")
	if err != nil {
		return fmt.Errorf("demo: making a working directory: %w", err)
	}
	r.dir = d
	r.onStop(func() { _ = os.RemoveAll(d) })
	return nil
}

// connect opens the connection the demo sends and reads on.
func (r *run) connect() error {
	nc, err := natsconn.Connect(r.stack.URL(), "demo")
	if err != nil {
		return fmt.Errorf("demo: connecting: %w", err)
	}
	r.onStop(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	r.nc, r.js, r.svc = nc, js, provider.NewClient(nc)
	return nil
}

// reviewerKey makes the throwaway key the reviewer signs with, which only
// this run trusts.
func (r *run) reviewerKey() (*sign.Keyring, error) {
	key, err := sign.Generate()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	approver := sign.ApproverFor(scenario.Reviewer, key.Public())
	// The seed's scope, and the story's against a real service.
	approver.Scopes = []string{document.DefaultScope, Scope}
	keys, err := sign.NewKeyring(approver)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r.key = key
	return keys, nil
}

// startExecutor starts one executor instance on a connection of its own
// (executor.Start), with short timeouts so that a dropped reply comes back
// within a second or two. Against a real service the fake one is stopped
// first: nothing may reach it in this run.
func (r *run) startExecutor(ctx context.Context, keys *sign.Keyring) error {
	exConn, err := natsconn.Connect(r.stack.URL(), "demo-executor")
	if err != nil {
		return fmt.Errorf("demo: connecting the executor: %w", err)
	}
	r.onStop(func() { _ = natsconn.Drain(exConn, 0) })
	taskSvc, callTimeout := provider.NewClient(exConn).TaskService(), time.Second
	if real := r.opts.Service; real != nil {
		if err := r.stack.StopService(); err != nil {
			return fmt.Errorf("demo: stopping the fake task service: %w", err)
		}
		callTimeout = r.callTimeout()
		if taskSvc, err = keepDeletedKeys(ctx, exConn, real); err != nil {
			return err
		}
	}
	checker := &gate.Checker{Keys: keys}
	if real := r.opts.Service; real != nil {
		checker.Serves = []gate.Destination{destinationOf(real)}
	}
	ex, err := executor.New(exConn, executor.Config{
		Gate:        checker,
		TaskService: taskSvc,
		ID:          "exec-1",
		Concurrency: 4,
		CallTimeout: callTimeout,
		Topology:    topology.Config{AckWait: 3 * time.Second, MaxDeliver: 5, NakDelay: 100 * time.Millisecond},
		Logger:      r.opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	stopEx, err := ex.Start(ctx)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	r.onStop(func() { _ = stopEx() })
	return nil
}

// keepDeletedKeys gives a real service that forgets a key when its task is
// deleted (CalDAV) the executors' intent ledger, in the run's embedded
// server, as serve does (service.Service's KeepDeletedKeys): a resend
// after the owner deleted the task is answered replayed, task deleted, and
// creates nothing. It returns what the executor calls.
func keepDeletedKeys(ctx context.Context, nc *nats.Conn, svc *service.Service) (taskservice.Service, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if _, err := svc.KeepDeletedKeys(ctx, js, true, 1); err != nil {
		return nil, fmt.Errorf("demo: the intent ledger: %w", err)
	}
	return svc.Service, nil
}

// tell plays the story against the fake task service or the real one and
// prints its table.
func (r *run) tell(ctx context.Context) error {
	if r.opts.Service != nil {
		if err := r.storyReal(ctx); err != nil {
			return err
		}
		r.printReal()
		return nil
	}
	if err := r.story(ctx); err != nil {
		return err
	}
	r.print()
	return nil
}

// story tells the seed scenario against the fake task service, whose
// counters (requests received, creates executed, tasks existing) each
// receipt carries.
func (r *run) story(ctx context.Context) error {
	e, err := r.seedEnvelopes()
	if err != nil {
		return err
	}

	// 1, 2: the same approval from two publisher processes, the service
	// restarted in between.
	var (
		firstTask string
		firstRc   *document.Receipt
	)
	second, err := r.sameApprovalTwice(ctx, e, func(first *document.Receipt) error {
		firstTask, firstRc = deref(first.TaskID), first
		r.row("1", "A", "original", first, "created", "1, 1, 1", "")
		r.shows("A's approval is sent: the service creates one task.")
		return r.restartService("provider")
	})
	if err != nil {
		return err
	}
	r.row("2", "A (second publisher process, service restarted)", "original", second, "replayed", "2, 1, 1", firstTask)
	r.shows("The same approval, sent again by a second publisher process after the service restarted on its store: " +
		"nothing is created; the receipt names the first task.")

	// 3: the same intent with changed content and its own approval.
	rc, err := r.send(ctx, "step 3", e.changed)
	if err != nil {
		return err
	}
	r.row("3", "A", "changed, with its own approval", rc, "idempotency_conflict", "3, 1, 1", firstTask)
	r.shows("A's request with another title, approved on its own under the same intent id: " +
		"a conflict naming the first task; nothing changes.")

	// 4: A's task deleted by its owner, then A's approval sent again.
	if err := r.deletedThenResent(ctx, e, firstRc); err != nil {
		return err
	}

	if err := r.freshService(ctx, e); err != nil {
		return err
	}
	if err := r.tamperedFake(ctx, e); err != nil {
		return err
	}
	return r.droppedReply(ctx, e)
}

// seedEnvelopes are the seed scenario's messages, signed with the run's
// key: A (intent-0001), A changed, B (intent-0002), and C (intent-0003).
func (r *run) seedEnvelopes() (envelopes, error) {
	now := time.Now().UTC().Truncate(time.Second)
	seed, err := scenario.BuildSigned(r.key, now, time.Hour)
	if err != nil {
		return envelopes{}, fmt.Errorf("demo: %w", err)
	}
	c, err := scenario.ApproveWith(seed.Original.Candidate, "task-request-0004", "intent-0003", scenario.Title,
		approve.Options{ID: "approval-0004", Key: r.key, At: now, Lifetime: time.Hour})
	if err != nil {
		return envelopes{}, fmt.Errorf("demo: %w", err)
	}
	return envelopes{original: seed.Original.Envelope(), changed: seed.Changed.Envelope(),
		newIntent: seed.NewIntent.Envelope(), lost: c.Envelope(), tampered: tamperedCases(seed)}, nil
}

// deletedThenResent is step 4: A's owner deletes its task (the fake
// service's delete endpoint, as a user deletes a task in their list), and
// A's approval is sent again. The service keeps the key: the resend is
// replayed with the first task id, marked deleted, and creates nothing.
func (r *run) deletedThenResent(ctx context.Context, e envelopes, first *document.Receipt) error {
	firstTask := deref(first.TaskID)
	if !r.opts.skipDelete {
		if _, err := r.svc.Delete(ctx, provider.DeleteRequest{Scope: first.Scope, IntentID: deref(first.IntentID)}); err != nil {
			return fmt.Errorf("demo: step 4: deleting A's task as its owner: %w", err)
		}
	}
	rc, err := r.send(ctx, "step 4", e.original)
	if err != nil {
		return err
	}
	r.rows = append(r.rows, deletedRow(rc, firstTask))
	return nil
}

// deletedRow is the row of step 4: it is ok only when the resend of A,
// after its task was deleted, was replayed with the first task id, says
// that the task was deleted, and the counters read 4, 1, 0 (one more
// request, no create, no task).
func deletedRow(rc *document.Receipt, firstTask string) Row {
	got := receiptText(rc)
	if rc.TaskDeleted {
		got += " (task deleted)"
	}
	return Row{
		Step: "4", Intent: "A (its task deleted by its owner)", Content: "original", Receipt: got, Counts: counts(rc),
		Want: "replayed " + firstTask + " (task deleted); 4, 1, 0",
		Shows: "A's owner deletes its task, and A's approval is sent again: the service still knows the key, " +
			"so nothing is created again (tasks existing 0).",
		OK: rc.Outcome == document.OutcomeReplayed && firstTask != "" && deref(rc.TaskID) == firstTask &&
			rc.TaskDeleted && counts(rc) == "4, 1, 0",
	}
}

// freshService sends A, then B with the same content, to a task service
// with a new store: two tasks.
func (r *run) freshService(ctx context.Context, e envelopes) error {
	if err := r.replaceService("provider-fresh"); err != nil {
		return err
	}
	ra, err := r.send(ctx, "fresh service, A", e.original)
	if err != nil {
		return err
	}
	rb, err := r.send(ctx, "fresh service, B", e.newIntent)
	if err != nil {
		return err
	}
	r.rows = append(r.rows, Row{
		Step: "fresh service", Intent: "A, then B", Content: "same content",
		Receipt: ra.Outcome + ", " + rb.Outcome, Counts: counts(rb), Want: "created, created; 2, 2, 2",
		OK: ra.Outcome == document.OutcomeCreated && rb.Outcome == document.OutcomeCreated && counts(rb) == "2, 2, 2" &&
			deref(ra.TaskID) != deref(rb.TaskID),
		Shows: "The service starts on a new, empty store, on purpose, as if its store had been lost: it has forgotten " +
			"every intent, so A is created again; then B, A's content under another intent id, is a task of its own. " +
			"The key is the intent id, not the content.",
	})
	return nil
}

// tamperedFake sends the tampered messages: each rejected at its check, and
// the service's counters do not move.
func (r *run) tamperedFake(ctx context.Context, e envelopes) error {
	before, err := r.svc.Stats(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the counters: %w", err)
	}
	checks, ok, err := r.sendTampered(ctx, e, func(rc *document.Receipt) bool { return rc.Counts == nil })
	if err != nil {
		return err
	}
	after, err := r.svc.Stats(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the counters: %w", err)
	}
	r.tamperedRow(checks, fmt.Sprintf("%s → %s", fmtCounts(before), fmtCounts(after)),
		"rejected at their checks; requests unchanged", ok && before == after)
	r.shows("Messages altered after their approval: each is rejected at the check named, " +
		"before any call to the service, whose counters do not move.")
	return nil
}

// droppedReply sends one message whose reply the service drops: the
// executor's call times out, the message comes back, and the service
// replays.
func (r *run) droppedReply(ctx context.Context, e envelopes) error {
	if err := r.replaceService("provider-dropped-reply"); err != nil {
		return err
	}
	arm := func(ctx context.Context) (func(context.Context) error, error) {
		if _, err := r.svc.ArmFault(ctx, 1); err != nil {
			return nil, fmt.Errorf("demo: arming the fault switch: %w", err)
		}
		return func(context.Context) error { return nil }, nil
	}
	rc, err := r.sendReplyLost(ctx, "dropped reply", arm, e.lost)
	if err != nil {
		return err
	}
	r.row("one publish, reply dropped", "C", "original", rc, "replayed", "2, 1, 1", "")
	last := &r.rows[len(r.rows)-1]
	last.Receipt = withDelivery(rc)
	last.OK = last.OK && rc.Delivery.Delivered >= 2
	r.shows("C is published once, to the service on yet another new store, so its first task is numbered " +
		deref(rc.TaskID) + " again. The service creates the task but drops its reply; the executor's call times out, " +
		"the message is delivered again, and the service answers replayed with the task it made: " +
		"two requests, one create, one task.")
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

// restartService stops the fake task service and starts it on the store
// in name under the working directory: the same store it served.
func (r *run) restartService(name string) error {
	if err := r.stack.StopService(); err != nil {
		return fmt.Errorf("demo: stopping the task service: %w", err)
	}
	if err := r.stack.StartService(filepath.Join(r.dir, name)); err != nil {
		return fmt.Errorf("demo: starting the task service: %w", err)
	}
	return nil
}

// replaceService stops the fake task service and starts it on a new store
// in name under the working directory, adopted in place of the store it
// served: on purpose, to show a service that has forgotten every intent.
func (r *run) replaceService(name string) error {
	old := r.stack.Store.ID()
	if err := r.stack.StopService(); err != nil {
		return fmt.Errorf("demo: stopping the task service: %w", err)
	}
	if err := r.stack.StartServiceReplacing(filepath.Join(r.dir, name), old); err != nil {
		return fmt.Errorf("demo: starting the task service on a new store: %w", err)
	}
	return nil
}

// sendHere publishes from this process and waits for the receipt.
func (r *run) sendHere(ctx context.Context, _ string, env []byte) (*document.Receipt, error) {
	return SendAndWait(ctx, r.js, env, 20*time.Second)
}

// SendAndWait publishes env as it is (send.Unchecked: the executors judge
// it) and waits up to wait for its receipt.
func SendAndWait(ctx context.Context, js jetstream.JetStream, env []byte, wait time.Duration) (*document.Receipt, error) {
	_, rc, err := send.NewClient(js).Send(ctx, send.Unchecked(env), send.Timeout(wait))
	if err != nil {
		return nil, err
	}
	return document.DecodeReceipt(rc.Raw)
}

// row adds a row of the story against the fake service: the receipt must
// say outcome (with wantTask, when given) and carry the counts wantCounts.
func (r *run) row(step, intent, content string, rc *document.Receipt, outcome, wantCounts, wantTask string) {
	ok := rc.Outcome == outcome && counts(rc) == wantCounts && (wantTask == "" || deref(rc.TaskID) == wantTask)
	want := outcome + "; " + wantCounts
	if wantTask != "" {
		want = outcome + " " + wantTask + "; " + wantCounts
	}
	r.rows = append(r.rows, Row{Step: step, Intent: intent, Content: content, Receipt: receiptText(rc), Counts: counts(rc), Want: want, OK: ok})
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
