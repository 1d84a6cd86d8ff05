package provider

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

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
	return &Hosted{Store: st, Service: svc, Conn: nc, log: log}, nil
}

// Stop ends what Host started, in the one order that loses no reply: the
// service stops taking calls and answers those it took, the connection is
// drained so that every reply goes out (closed at once after
// natsconn.DrainTimeout, with a warning), and only then is the store closed.
func (h *Hosted) Stop() error {
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
