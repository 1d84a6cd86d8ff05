package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// StreamState reads the state of the stream name on js (its messages,
// sequences and consumers), failing the test if it cannot.
func StreamState(t testing.TB, js jetstream.JetStream, name string) jetstream.StreamState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// ChangeConsumer changes the executors' consumer on APPROVALS with change,
// behind provisioning's back (the record of what was provisioned stays as
// it was), as a role that may update consumers but not the record could.
func ChangeConsumer(t testing.TB, js jetstream.JetStream, change func(*jetstream.ConsumerConfig)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	change(&cc)
	if _, err := js.UpdateConsumer(ctx, topology.ApprovalsStream, cc); err != nil {
		t.Fatal(err)
	}
}

// AwaitStreamState reads the state of the stream name on js until until
// holds for it, and returns that state; it fails the test, saying what was
// awaited, when within passes first.
func AwaitStreamState(t testing.TB, js jetstream.JetStream, name string, within time.Duration, what string, until func(jetstream.StreamState) bool) jetstream.StreamState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		state := StreamState(t, js, name)
		if until(state) {
			return state
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stream %s is still %+v", what, name, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
