package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// Env is a running server and task service.
type Env struct {
	T       testing.TB
	Dir     string
	Stack   *embedded.Stack
	NC      *nats.Conn
	JS      jetstream.JetStream
	Service *provider.Client
	Log     *slog.Logger
}

// Topology is the fast topology tests use: short AckWait and delays.
var Topology = topology.Config{AckWait: 2 * time.Second, MaxDeliver: 4, NakDelay: 50 * time.Millisecond, MaxNakDelay: 500 * time.Millisecond}

// Logger returns a logger for tests: silent unless SENDTWICE_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("SENDTWICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start starts a server and the task service, with faults allowed, and
// sets up the topology (topology.SetUp, as the commands do). Everything
// stops when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartWith(t, embedded.StackOptions{})
}

// StartWith is Start with stack options (Dir, Port and AllowFaults are set
// here).
func StartWith(t testing.TB, o embedded.StackOptions) *Env {
	t.Helper()
	dir := t.TempDir()
	log := Logger()
	o.Dir, o.Port, o.AllowFaults, o.Logger = dir, -1, true, log
	st, err := embedded.StartStack(o)
	if err != nil {
		t.Fatalf("starting the embedded stack: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nc, js := Connect(t, st.URL())
	if _, err := topology.SetUp(context.Background(), js, Topology, topology.SetUpOptions{Logger: log}); err != nil {
		t.Fatalf("setting up the topology: %v", err)
	}
	return &Env{T: t, Dir: dir, Stack: st, NC: nc, JS: js, Service: provider.NewClient(nc), Log: log}
}

// URL is the server's client URL.
func (e *Env) URL() string { return e.Stack.URL() }

// RestartService stops the task service and starts it on dir (relative to
// the test directory; "provider" is the original store). The store in dir
// must be the one the deployment adopted: a new store on this server's
// NATS data is refused (provider.ErrNotAdopted) unless it replaces the
// adopted one explicitly (Stack.StartServiceReplacing).
func (e *Env) RestartService(dir string) {
	e.T.Helper()
	if err := e.Stack.StopService(); err != nil {
		e.T.Fatalf("stopping the task service: %v", err)
	}
	if err := e.Stack.StartService(filepath.Join(e.Dir, dir)); err != nil {
		e.T.Fatalf("starting the task service: %v", err)
	}
}

// Executor runs an executor instance in this process until the test ends
// (or stop is called) and returns it once it consumes.
func (e *Env) Executor(cfg executor.Config) (ex *executor.Executor, stop func()) {
	e.T.Helper()
	if reflect.ValueOf(cfg.Topology).IsZero() {
		cfg.Topology = Topology
	}
	if cfg.Logger == nil {
		cfg.Logger = e.Log
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 500 * time.Millisecond
	}
	if cfg.Gate == nil {
		// Tests send unsigned seed approvals unless they test signing.
		cfg.Gate = &gate.Checker{AllowUnsigned: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ex, stopEx, err := e.Stack.StartExecutor(ctx, "test-executor", cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	stop = func() { _ = stopEx() }
	e.T.Cleanup(stop)
	return ex, stop
}

// Counts reads the task service's counters.
func (e *Env) Counts() provider.Counts {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.Service.Stats(ctx)
	if err != nil {
		e.T.Fatalf("reading the counters: %v", err)
	}
	return c
}

// Send publishes an envelope as it is (no local check) and returns the
// receipt the executor publishes for it, waiting up to 30 seconds.
func (e *Env) Send(envelope []byte) *document.Receipt {
	e.T.Helper()
	_, rc, err := send.NewClient(e.JS).Send(context.Background(), send.Unchecked(envelope), send.Timeout(30*time.Second))
	if err != nil {
		e.T.Fatalf("sending: %v", err)
	}
	d, err := document.DecodeReceipt(rc.Raw)
	if err != nil {
		e.T.Fatalf("decoding the receipt: %v", err)
	}
	return d
}

// Buffer collects a child process's output safely from several goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CreateDirectly calls the task service's create endpoint directly, from
// outside the executors, with callRef: the request of envelope (which the
// gate must be able to read) under intent, as a request document of its own
// (with its own digest when the intent differs), as the service requires
// of every create.
func (e *Env) CreateDirectly(envelope []byte, intent, callRef string) provider.CreateResponse {
	e.T.Helper()
	v, err := gate.CheckBindings(envelope)
	if err != nil {
		e.T.Fatal(err)
	}
	q := *v.Request
	q.IntentID = intent
	doc, err := json.Marshal(q)
	if err != nil {
		e.T.Fatal(err)
	}
	req, err := provider.RequestFor(doc)
	if err != nil {
		e.T.Fatal(err)
	}
	req.CallRef = callRef
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.Service.Create(ctx, req)
	if err != nil {
		e.T.Fatalf("creating directly for intent %s: %v", intent, err)
	}
	return resp
}
