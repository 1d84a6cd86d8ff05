package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Start runs e in a goroutine of its own and returns once it consumes: the
// one way to start an executor beside other work (the command's serve runs
// Run itself). ctx bounds only the wait for the start; the executor runs
// until stop is called, which cancels it, waits until it has drained and
// returns Run's error. stop may be called more than once.
//
// When Run ends before the executor consumes, or ctx ends first, Start
// stops it and returns the error; stop is nil then.
func (e *Executor) Start(ctx context.Context) (stop func() error, err error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- e.Run(runCtx, ready) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("Run returned before consuming")
		}
		return nil, fmt.Errorf("executor: stopped at start: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return nil, fmt.Errorf("executor: did not start: %w", ctx.Err())
	}
	var once sync.Once
	var runErr error
	return func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}, nil
}
