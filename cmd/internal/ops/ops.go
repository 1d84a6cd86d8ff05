package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// CheckTimeout bounds one readiness check.
const CheckTimeout = 2 * time.Second

// Check is one readiness condition; it returns nil when the condition holds.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Server is a running HTTP server for the operational endpoints.
type Server struct {
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu       sync.Mutex
	checks   []Check
	draining bool
}

// ErrStarting is reported by /readyz before any check is registered.
var ErrStarting = errors.New("starting")

// ErrDraining is reported by /readyz once Drain was called.
var ErrDraining = errors.New("shutting down: finishing the work in flight")

// Listen binds addr (HOST:PORT; port 0 picks a free one) and serves the
// endpoints with the metrics gathered from g until Close.
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ops: listening on %s: %w", addr, err)
	}
	s := &Server{log: log, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slogPrintln{log},
		ErrorHandling: promhttp.ContinueOnError,
		Timeout:       10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "/metrics  Prometheus metrics\n/healthz  liveness\n/readyz   readiness (?verbose lists every check)")
	})
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ops HTTP server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// AddCheck registers a readiness check.
func (s *Server) AddCheck(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, Check{Name: name, Func: fn})
}

// Drain makes /readyz fail from now on, so that no new work is routed here
// while the process finishes what it holds; /healthz and /metrics go on.
func (s *Server) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
}

// Close stops the server, letting requests in progress finish (bounded by
// ctx).
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}

// Result is the outcome of one readiness check.
type Result struct {
	Name string
	Err  error
}

// Ready runs the checks and returns their results and whether all hold.
func (s *Server) Ready(ctx context.Context) ([]Result, bool) {
	s.mu.Lock()
	checks := append([]Check(nil), s.checks...)
	draining := s.draining
	s.mu.Unlock()
	var out []Result
	ok := true
	if draining {
		out = append(out, Result{Name: "shutdown", Err: ErrDraining})
		ok = false
	}
	if len(checks) == 0 {
		out = append(out, Result{Name: "startup", Err: ErrStarting})
		ok = false
	}
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		err := c.Func(cctx)
		cancel()
		out = append(out, Result{Name: c.Name, Err: err})
		if err != nil {
			ok = false
		}
	}
	return out, ok
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	results, ok := s.Ready(r.Context())
	_, verbose := r.URL.Query()["verbose"]
	var b strings.Builder
	for _, res := range results {
		switch {
		case res.Err != nil:
			fmt.Fprintf(&b, "[-]%s failed: %s\n", res.Name, oneLine(res.Err.Error()))
		case verbose:
			fmt.Fprintf(&b, "[+]%s ok\n", res.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		b.WriteString("not ready\n")
	} else {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// slogPrintln lets promhttp report its errors through slog.
type slogPrintln struct{ log *slog.Logger }

func (l slogPrintln) Println(v ...any) {
	l.log.Warn("serving metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// Start listens on addr when it is not empty and turns not ready (Drain)
// as soon as ctx ends. It returns the server (nil when addr is empty) and a
// function that closes it, to defer.
func Start(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger) (*Server, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	srv, err := Listen(addr, g, log)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, srv.Drain)
	return srv, func() {
		stop()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(cctx)
	}, nil
}
