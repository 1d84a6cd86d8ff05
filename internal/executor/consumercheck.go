package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file holds the executor to the consumer provisioning made. The
// consumer decides what an executor is given and how often it may try: a
// consumer rewritten by anyone but provisioning (another filter subject, a
// budget of one delivery, another ack wait) would make the executors skip
// approvals or dead-letter them early without a word. So an executor
// compares the consumer with the record of what provisioning applied
// (topology.ReadRecord) at start and on a timer while it runs, and refuses
// to consume from one that differs, naming each difference.

// DefaultConsumerCheckInterval is how often a running executor compares
// the consumer with what provisioning recorded.
const DefaultConsumerCheckInterval = 30 * time.Second

// ErrConsumerChanged says that the consumer differs from what provisioning
// recorded; a *ConsumerError wraps it with the differences.
var ErrConsumerChanged = errors.New("executor: the consumer differs from what provisioning applied")

// ConsumerError is a consumer that differs from what was expected of it.
type ConsumerError struct {
	Differences []topology.Difference
	// NoRecord says that no record of what was provisioned exists, so the
	// consumer was compared with what this executor's settings provision.
	NoRecord bool
}

func (e *ConsumerError) Error() string {
	against := "what provisioning recorded"
	if e.NoRecord {
		against = "what this executor's settings provision (no record of what was provisioned: run executor provision to make one)"
	}
	return fmt.Sprintf("%v: compared with %s: %s; refusing to consume from it until provisioning sets it right again (executor provision)",
		ErrConsumerChanged, against, topology.Describe(e.Differences))
}

func (e *ConsumerError) Unwrap() error { return ErrConsumerChanged }

// checkConsumer compares the consumer as it is now with what provisioning
// recorded, or, without a record, with what this executor's topology
// provisions. It returns a *ConsumerError when they differ, another error
// when either cannot be read.
func (e *Executor) checkConsumer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want, err := topology.ReadRecord(ctx, e.js)
	noRecord := errors.Is(err, topology.ErrNoRecord)
	switch {
	case noRecord:
		want = topology.Intended(e.given)
	case err != nil:
		return fmt.Errorf("executor: checking the consumer: %w", err)
	}
	var found *jetstream.ConsumerConfig
	c, err := e.js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	switch {
	case err == nil:
		cc := c.CachedInfo().Config
		found = &cc
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("executor: checking the consumer: reading consumer %s: %w", topology.Consumer, err)
	}
	var diffs []topology.Difference
	if found == nil {
		diffs = []topology.Difference{topology.Missing(topology.ConsumerObject)}
	} else {
		diffs = topology.DiffConsumer(want.Consumer, *found, want.Recorded)
	}
	if len(diffs) > 0 {
		return &ConsumerError{Differences: diffs, NoRecord: noRecord}
	}
	return nil
}

// watchConsumer compares the consumer with what provisioning recorded
// every interval until ctx ends. When it differs, and still differs when
// read again a moment later (provisioning writes the consumer first and its
// record next), it logs the differences at ERROR, sends the error on
// changed and returns. A check that cannot read either is logged and tried
// again at the next tick.
func (e *Executor) watchConsumer(ctx context.Context, interval time.Duration, changed chan<- error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := e.checkConsumer(ctx)
		var ce *ConsumerError
		if errors.As(err, &ce) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(interval/4, time.Second)):
			}
			err = e.checkConsumer(ctx)
		}
		switch {
		case err == nil:
		case errors.As(err, &ce):
			e.log.Error("the consumer was changed since it was provisioned: no new deliveries are taken; finishing those in flight and stopping",
				"consumer", topology.Consumer, "differences", topology.Describe(ce.Differences))
			changed <- err
			return
		case ctx.Err() == nil:
			e.log.Warn("checking the consumer's configuration failed; checking again later", "retry_in", interval, "err", err)
		}
	}
}
