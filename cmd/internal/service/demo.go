package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/taskservice"
)

// CheckForDemo checks the flags of a task service for the demo, which
// cannot call Redmine: its per-key locks live in the executors' intent
// ledger on a NATS server that runs before the adapter opens, and the
// demo's server starts only inside the demo.
func (f *Config) CheckForDemo() error {
	if f.Kind == KindRedmine {
		return fmt.Errorf("%w: demo cannot call Redmine: its per-key locks live in the executors' intent ledger on a NATS server that runs before the adapter opens, "+
			"and the demo's server starts only inside the demo; run executor serve --task-service redmine, or executor probe --task-service redmine to see it answer", cli.ErrUsage)
	}
	return f.Check()
}

// OpenForDemo opens a task service the demo's executor calls directly (one
// not reached over NATS), losing replies on demand, and reaches it once,
// creating nothing. The demo needs it to list its tasks, lose a reply and
// delete a task.
func (f *Config) OpenForDemo(ctx context.Context, callTimeout time.Duration) (*Service, error) {
	f.LoseReplies = true
	svc, err := f.Open(ctx, func() (*nats.Conn, error) {
		return nil, errors.New("demo: this task service is not reached over NATS")
	}, callTimeout)
	if err != nil {
		return nil, fmt.Errorf("demo: opening the task service: %w", err)
	}
	_, lists := svc.Adapter.(taskservice.Lister)
	_, deletes := svc.Adapter.(taskservice.Deleter)
	if !lists || svc.LoseReply == nil || !deletes {
		return nil, fmt.Errorf("demo: the %s cannot list its tasks, lose a reply or delete a task", svc.Name)
	}
	if err := svc.Reach(ctx); err != nil {
		return nil, fmt.Errorf("demo: not run, nothing was created: %w", err)
	}
	return svc, nil
}
