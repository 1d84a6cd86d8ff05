package testenv

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/ledger"
)

// JetStream starts a bare embedded NATS server with JetStream (no streams,
// no task service) for a test that needs only a bucket or a stream of its
// own, and returns a client of it. Both stop when the test ends.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	_, js := Connect(t, NATS(t))
	return js
}

// Ledger provisions the executors' intent ledger on js (one replica), as
// the commands do, and opens it with o.
func Ledger(t testing.TB, js jetstream.JetStream, o ledger.Options) *ledger.Ledger {
	t.Helper()
	ctx := context.Background()
	if err := ledger.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ctx, js, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
