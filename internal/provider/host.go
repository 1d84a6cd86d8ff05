package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/natsconn"
)

// Hosted is the service running in this process: its store, served on a
// NATS connection of its own.
type Hosted struct {
	Store   *Store
	Service *Service
	Conn    *nats.Conn
	log     *slog.Logger
	dir     string // the data directory as Host was given it

	// serving and storeOpen are what the readiness checks see (AddChecks).
	serving, storeOpen atomic.Bool
}

// Host opens the store in dir and serves it on the connection that connect
// makes: the one way a process hosts the service (the provider command,
// internal/embedded, the bench). The store is opened first, so that a data
// directory in use is refused before anything joins NATS. When Host fails,
// nothing it opened stays open.
func Host(dir string, opts Options, cfg ServiceConfig, connect func() (*nats.Conn, error)) (*Hosted, error) {
	st, err := Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("provider: opening the store: %w", err)
	}
	if cfg.DataDir == "" {
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			cfg.DataDir = abs
		}
	}
	nc, err := connect()
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	svc, err := Serve(nc, st, cfg)
	if err != nil {
		nc.Close()
		return nil, errors.Join(fmt.Errorf("provider: serving: %w", err), st.Close())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Hosted{Store: st, Service: svc, Conn: nc, log: log, dir: dir}
	h.serving.Store(true)
	h.storeOpen.Store(true)
	return h, nil
}

// AddChecks gives add the readiness checks of the hosted service: the NATS
// connection is connected, the service serves (until Stop) and the store
// is open.
func (h *Hosted) AddChecks(add func(name string, check func(context.Context) error)) {
	add("nats", func(context.Context) error {
		if s := h.Conn.Status(); s != nats.CONNECTED {
			return fmt.Errorf("NATS connection %s", s)
		}
		return nil
	})
	add("service", func(context.Context) error {
		if !h.serving.Load() {
			return errors.New("the service is stopped")
		}
		return nil
	})
	add("store", func(context.Context) error {
		if !h.storeOpen.Load() {
			return errors.New("the store is closed")
		}
		return nil
	})
}

// LogServing says that the service serves, where, and its counters.
func (h *Hosted) LogServing() {
	counts := h.Store.Stats()
	abs, aerr := filepath.Abs(h.dir)
	if aerr != nil {
		abs = h.dir
	}
	h.log.Info("serving; stop with SIGINT or SIGTERM", "server", h.Conn.ConnectedUrlRedacted(), "data", abs, "store_id", h.Store.ID(),
		"requests_received", counts.RequestsReceived, "creates_executed", counts.CreatesExecuted,
		"tasks_existing", counts.TasksExisting)
}

// Stop ends what Host started, in the one order that loses no reply: the
// service stops taking calls and answers those it took, the connection is
// drained so that every reply goes out (closed at once after
// natsconn.DrainTimeout, with a warning), and only then is the store closed.
func (h *Hosted) Stop() error {
	h.serving.Store(false)
	defer h.storeOpen.Store(false)
	err := h.Service.Stop()
	if derr := natsconn.Drain(h.Conn, 0); derr != nil {
		if errors.Is(derr, natsconn.ErrDrainTimeout) {
			h.log.Warn("NATS drain timed out; closing", "timeout", natsconn.DrainTimeout)
		} else {
			err = errors.Join(err, fmt.Errorf("provider: draining the connection: %w", derr))
		}
	}
	if cerr := h.Store.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("provider: closing the store: %w", cerr))
	}
	return err
}
