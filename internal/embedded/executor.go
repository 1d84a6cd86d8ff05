package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// StartExecutor starts an executor instance in this process on a NATS
// connection of its own to the stack's server (named name), and returns
// once it consumes (executor.Start; ctx bounds only that wait). Without
// cfg.TaskService it calls the stack's fake task service over that
// connection, each call bounded by cfg.CallTimeout. stop stops the
// executor, then drains its connection (natsconn.Drain, bounded by
// natsconn.DrainTimeout), as executor.Run asks of its caller, so that
// every ack and publish handed to it goes out; it may be called more than
// once.
func (st *Stack) StartExecutor(ctx context.Context, name string, cfg executor.Config) (ex *executor.Executor, stop func() error, err error) {
	nc, err := natsconn.Connect(st.URL(), name)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded: connecting executor %s: %w", name, err)
	}
	if cfg.TaskService == nil {
		c := provider.NewClient(nc)
		c.Timeout = cfg.CallTimeout
		cfg.TaskService = c.TaskService()
	}
	ex, err = executor.New(nc, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("embedded: executor %s: %w", name, err)
	}
	stopRun, err := ex.Start(ctx)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("embedded: starting executor %s: %w", name, err)
	}
	return ex, func() error {
		err := stopRun()
		if derr := natsconn.Drain(nc, 0); derr != nil {
			err = errors.Join(err, fmt.Errorf("embedded: draining executor %s's connection: %w", name, derr))
		}
		return err
	}, nil
}
