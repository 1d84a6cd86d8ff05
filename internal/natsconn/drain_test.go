package natsconn_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/natsconn"
)

func startServer(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

func TestDrainDeliversWhatWasPublishedAndClosesTheConnection(t *testing.T) {
	url := startServer(t)
	sub, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got, err := sub.SubscribeSync("drain.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := nc.Publish("drain.test", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := natsconn.Drain(nc, 5*time.Second); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if !nc.IsClosed() {
		t.Error("the connection is not closed after Drain")
	}
	for i := range 100 {
		if _, err := got.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("message %d of 100 not delivered: %v", i+1, err)
		}
	}
}

func TestDrainOfAClosedConnectionIsNoError(t *testing.T) {
	nc, err := nats.Connect(startServer(t))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := natsconn.Drain(nc, time.Second); err != nil {
		t.Errorf("drain of a closed connection: %v", err)
	}
}
