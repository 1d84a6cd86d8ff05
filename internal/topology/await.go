package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SetUpOptions say how SetUp and Await treat what exists.
type SetUpOptions struct {
	// NoProvision finds the existing consumer and creates or changes
	// nothing (for a user without JetStream admin rights).
	NoProvision bool
	// ReplicasGiven says the caller chose Config.Replicas; without it, a
	// zero Replicas takes those of the existing streams, else 1.
	ReplicasGiven bool
	// Logger is told what was set up; nil = slog.Default().
	Logger *slog.Logger
}

// SetUp sets up the streams and the consumer once (or, with NoProvision,
// finds the consumer) and returns the topology with the replicas settled:
// when not given, those of the existing streams, else 1.
func SetUp(ctx context.Context, js jetstream.JetStream, c Config, o SetUpOptions) (Config, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if o.NoProvision {
		if o.ReplicasGiven {
			log.Warn("--replicas is ignored with --no-provision: the streams are as provisioned")
		}
		if _, err := js.Consumer(ctx, ApprovalsStream, Consumer); err != nil {
			return c, fmt.Errorf("topology: finding consumer %s on %s: %w", Consumer, ApprovalsStream, err)
		}
		return c, nil
	}
	existing := 0
	s, err := js.Stream(ctx, ApprovalsStream)
	switch {
	case err == nil:
		existing = s.CachedInfo().Config.Replicas
	case errors.Is(err, jetstream.ErrStreamNotFound):
	default:
		return c, fmt.Errorf("topology: reading stream %s: %w", ApprovalsStream, err)
	}
	switch {
	case c.Replicas == 0 && existing > 0:
		c.Replicas = existing
	case c.Replicas == 0:
		c.Replicas = 1
	case existing > 0 && existing != c.Replicas:
		log.Warn("changing the replicas of the streams and the consumer", "from", existing, "to", c.Replicas)
	}
	if _, err := Ensure(ctx, js, c); err != nil {
		return c, err
	}
	log.Info("streams and consumer ready", "replicas", c.Replicas)
	return c, nil
}

// Await is SetUp, tried again while JetStream does not answer yet (a
// cluster still electing its leaders, a node not up yet) for up to wait,
// with a growing delay. It returns ctx's error when ctx ends first.
func Await(ctx context.Context, js jetstream.JetStream, c Config, o SetUpOptions, wait time.Duration) (Config, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	deadline := time.Now().Add(wait)
	delay := 250 * time.Millisecond
	for {
		resolved, err := SetUp(ctx, js, c, o)
		if err == nil {
			return resolved, nil
		}
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("topology: JetStream not ready after %s: %w", wait, err)
		}
		log.Warn("JetStream not ready; trying again", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
