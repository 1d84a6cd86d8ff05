package sendtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/approval"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// ReviewerName is the name the kit's throwaway reviewer approves under
// (approved_by of the approvals Approve signs).
const ReviewerName = "sendtest-reviewer"

// Errors of the package: every error of New, Connect, Counts and
// DropReplies matches one of them (Approve's are approval's, Close's
// those of what it stops).
var (
	// ErrStart: the pipeline could not be started (New, Start).
	ErrStart = errors.New("sendtest: starting the pipeline")
	// ErrConnect: Connect could not connect to the running pipeline's
	// server.
	ErrConnect = errors.New("sendtest: connecting to the server")
	// ErrClosed: the pipeline is closed (Connect, Counts and DropReplies
	// after Close).
	ErrClosed = errors.New("sendtest: the pipeline is closed")
	// ErrService: the fake task service did not answer.
	ErrService = errors.New("sendtest: the task service did not answer")
)

// The executor's timing: short enough that a dropped reply is answered
// again within seconds, long enough that a busy test machine does not
// time out a call that succeeds.
var (
	callTimeout = 2 * time.Second
	fast        = topology.Config{AckWait: 5 * time.Second, MaxDeliver: 5, NakDelay: 100 * time.Millisecond, MaxNakDelay: time.Second}
)

// Pipeline is a running server, task service and executor. Its methods
// are safe for concurrent use.
type Pipeline struct {
	stack    *embedded.Stack
	service  *provider.Client
	reviewer *approval.Key
	trusted  *send.TrustedApprovers

	mu     sync.Mutex
	closed bool
	closes []func() error // last first
	// removeDir is New's directory, removed when everything has stopped.
	removeDir string
}

// Start starts a pipeline for the test, with its data in t.TempDir(), and
// stops it when the test ends (t.Cleanup). It fails the test if the
// pipeline cannot start.
func Start(t testing.TB) *Pipeline {
	t.Helper()
	p, err := start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("sendtest: closing the pipeline: %v", err)
		}
	})
	return p
}

// New starts a pipeline with its data in a new temporary directory, for
// code without a testing.TB; Close stops it and removes the directory.
func New() (*Pipeline, error) {
	dir, err := os.MkdirTemp("", "sendtest-")
	if err != nil {
		return nil, fmt.Errorf("%w: making a directory: %w", ErrStart, err)
	}
	p, err := start(dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	p.removeDir = dir
	return p, nil
}

func start(dir string) (_ *Pipeline, err error) {
	quiet := slog.New(slog.DiscardHandler)
	reviewer, err := approval.NewKey(ReviewerName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	trusted, err := send.NewTrustedApprovers(reviewer.Approver("*"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	// The executor's keyring: the same approver, as the executors read it.
	trust := sign.ApproverFor(ReviewerName, reviewer.PublicKey())
	trust.Scopes = []string{"*"}
	keys, err := sign.NewKeyring(trust)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	stack, err := embedded.StartStack(embedded.StackOptions{Dir: dir, Host: "127.0.0.1", Port: -1, AllowFaults: true, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p := &Pipeline{stack: stack, reviewer: reviewer, trusted: trusted}
	p.onClose(stack.Close)
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
		}
	}()
	nc, err := p.connect("sendtest")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p.service = provider.NewClient(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, stop, err := stack.StartExecutor(ctx, "sendtest-executor", executor.Config{
		ID: "sendtest-executor", Gate: &gate.Checker{Keys: keys}, CallTimeout: callTimeout, Topology: fast, Logger: quiet,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p.onClose(stop)
	return p, nil
}

// onClose has Close run f, before what was registered earlier.
func (p *Pipeline) onClose(f func() error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closes = append(p.closes, f)
}

// connect opens a connection that Close closes. Its error is ErrClosed
// after Close, else the connection's.
func (p *Pipeline) connect(name string) (*nats.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	nc, err := natsconn.Connect(p.stack.URL(), name)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	p.closes = append(p.closes, func() error { nc.Close(); return nil })
	return nc, nil
}

// URL is the NATS server's client URL (nats://127.0.0.1:<port>), for code
// that connects by itself, such as a child process.
func (p *Pipeline) URL() string { return p.stack.URL() }

// Connect opens a new NATS connection to the server, as another process
// of the application would, and returns its JetStream context for
// send.NewClient. Close closes it. Its errors match ErrConnect, or
// ErrClosed after Close.
func (p *Pipeline) Connect() (jetstream.JetStream, error) {
	nc, err := p.connect("sendtest-client")
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	return js, nil
}

// Reviewer is the throwaway reviewer's key, which only this pipeline's
// executor trusts (named ReviewerName, in every scope).
func (p *Pipeline) Reviewer() *approval.Key { return p.reviewer }

// Approve approves the request for the candidate as the reviewer, signed
// with its key (approval.Approve with the reviewer's key; the approval's
// time is now, its lifetime approval.DefaultLifetime).
func (p *Pipeline) Approve(candidate, request []byte) ([]byte, error) {
	return approval.Approve(candidate, request, approval.Options{Key: p.reviewer})
}

// Trusted are the executor's trusted approvers (the reviewer alone), for
// a local check with send.Trusted.
func (p *Pipeline) Trusted() *send.TrustedApprovers { return p.trusted }

// Counts reads the fake task service's three counters: requests received,
// creates executed, tasks existing. After Close its error is ErrClosed.
func (p *Pipeline) Counts(ctx context.Context) (send.Counts, error) {
	if p.isClosed() {
		return send.Counts{}, ErrClosed
	}
	c, err := p.service.Stats(ctx)
	if err != nil {
		return send.Counts{}, fmt.Errorf("%w: reading the counters: %w", ErrService, err)
	}
	return c, nil
}

// DropReplies makes the task service drop its replies to the next n
// creates after it has acted: the executor's call times out, the message
// is delivered again, and the service answers replayed with the task it
// made. It shows what a lost answer does to the application's sends.
// After Close its error is ErrClosed.
func (p *Pipeline) DropReplies(ctx context.Context, n int) error {
	if p.isClosed() {
		return ErrClosed
	}
	if _, err := p.service.ArmFault(ctx, n); err != nil {
		return fmt.Errorf("%w: arming the dropped replies: %w", ErrService, err)
	}
	return nil
}

// isClosed reports whether Close was called.
func (p *Pipeline) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops the executor, the task service and the server, closes the
// connections Connect opened, and removes what New made. It may be called
// more than once.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	closes := p.closes
	p.closes, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for i := len(closes) - 1; i >= 0; i-- {
		errs = append(errs, closes[i]())
	}
	if p.removeDir != "" {
		errs = append(errs, os.RemoveAll(p.removeDir))
		p.removeDir = ""
	}
	return errors.Join(errs...)
}
