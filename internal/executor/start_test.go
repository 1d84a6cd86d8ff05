package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestStartReturnsOnceConsumingAndStopWaitsForTheRun(t *testing.T) {
	env := testenv.Start(t)
	ex, _ := newExecutor(t, env, executor.Config{ID: "exec-start"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := ex.Start(ctx)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c, err := env.JS.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil || info.NumWaiting == 0 {
		t.Errorf("after Start the consumer has %d pulls waiting (%v); want the executor's", info.NumWaiting, err)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("a second stop: %v", err)
	}
}

func TestStartReportsAnExecutorThatCannotConsume(t *testing.T) {
	env := testenv.Start(t)
	if err := env.JS.DeleteStream(context.Background(), topology.ApprovalsStream); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExecutor(t, env, executor.Config{ID: "exec-start", NoProvision: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := ex.Start(ctx)
	if err == nil || stop != nil || !strings.Contains(err.Error(), "stopped at start") {
		t.Fatalf("Start without a consumer: %v (stop %v); want an error saying it stopped at start", err, stop != nil)
	}
}
