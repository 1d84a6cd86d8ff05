package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/taskservice"
)

// ErrRefused is returned by OpenToServe when the task service refuses the
// executor before the first delivery (a wrong URL or password).
var ErrRefused = errors.New("the task service refuses this executor")

// Serving is how serve runs its task service: on the executor's
// connection, with the intent ledger provisioned (Provision, with
// Replicas) or only found, recorded under the executor's ID.
type Serving struct {
	NC          *nats.Conn
	JS          jetstream.JetStream
	Provision   bool
	Replicas    int
	ID          string
	CallTimeout time.Duration
	Log         *slog.Logger
}

// OpenToServe opens the service as serve runs it: composed with the
// intent ledger (KeepDeletedKeys), checked (Reach: a permanent refusal
// stops serve with ErrRefused, a transient failure is logged), and
// recorded for status and verify (RecordAtStart). A kind that keeps its
// locks in the intent ledger (redmine) takes it as the streams are:
// provisioned unless told not to.
func (f *Config) OpenToServe(ctx context.Context, on Serving) (*Service, error) {
	f.ProvisionLedger, f.LedgerReplicas = on.Provision, on.Replicas
	if err := f.TakeMarkKey(ctx, on.JS, true); err != nil {
		return nil, err
	}
	svc, err := f.Open(ctx, func() (*nats.Conn, error) { return on.NC, nil }, on.CallTimeout)
	if err != nil {
		return nil, err
	}
	kept, err := svc.KeepDeletedKeys(ctx, on.JS, on.Provision, on.Replicas)
	if err != nil {
		return nil, fmt.Errorf("opening the intent ledger of %s: %w", svc.Name, err)
	}
	on.Log.Info("task service", "name", svc.Name, "key_scope", svc.Scope, "intent_ledger", kept)
	for _, w := range svc.Where {
		on.Log.Info("serving destination", "destination", w)
	}
	if err := svc.reachToServe(ctx, on.CallTimeout, on.Log); err != nil {
		return nil, err
	}
	// status and verify read the service from this record.
	if err := RecordAtStart(ctx, on.JS, f, on.Provision, on.Replicas, on.ID, svc.Name, on.Log); err != nil {
		return nil, err
	}
	return svc, nil
}

// reachToServe checks, creating nothing, that the task service answers and
// accepts the login before serve consumes anything. A permanent refusal
// (a wrong URL or password: 401, 403, 404) stops serve with that reason,
// since every delivery would otherwise be dead-lettered for it; a transient
// failure (the server down for a moment) is logged and serving goes on, as
// deliveries are retried until it answers.
func (s *Service) reachToServe(ctx context.Context, callTimeout time.Duration, log *slog.Logger) error {
	rctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
	defer cancel()
	err := s.Reach(rctx)
	switch {
	case err == nil:
		return nil
	case taskservice.IsPermanent(err):
		return fmt.Errorf("%w: %w", ErrRefused, err)
	default:
		log.Warn("the task service does not answer yet; deliveries are retried until it does", "err", err)
		return nil
	}
}
