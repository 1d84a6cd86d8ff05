package testenv

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/natsconn"
)

// NATS starts a bare embedded NATS server with JetStream (no streams, no
// task service) for a test that connects on its own, and returns its URL.
// The server stops when the test ends.
func NATS(t testing.TB) string {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// Connect connects to the NATS server at url with opts and returns the
// connection and a JetStream client of it. The connection closes when the
// test ends; a caller that needs it closed sooner may close it itself.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsconn.Connect(url, "test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
