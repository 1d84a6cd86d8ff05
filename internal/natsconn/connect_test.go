package natsconn_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/natsconn"
)

func TestConnectNamesTheClientAndReconnectsWithoutLimit(t *testing.T) {
	url := startServer(t)
	nc, err := natsconn.Connect(url, "connect-test", nats.ReconnectWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.Opts.Name; got != "connect-test" {
		t.Errorf("name %q; want connect-test", got)
	}
	if got := nc.Opts.MaxReconnect; got != -1 {
		t.Errorf("MaxReconnect %d; want -1 (without limit)", got)
	}
	if got := nc.Opts.ReconnectWait; got != 0 {
		t.Errorf("ReconnectWait %s; want 0: an option given overrides the default", got)
	}
}

func TestAFailedConnectNamesTheServerWithoutItsPassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = natsconn.Connect("nats://alice:s3cret@"+addr, "connect-test")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), addr) ||
		!strings.HasPrefix(err.Error(), "natsconn: connecting to NATS at ") || !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("error %q; want it prefixed, naming %s, without the password, wrapping nats.ErrNoServers", err, addr)
	}
}

func TestBucketCreatesUpdatesAndOpens(t *testing.T) {
	url := startServer(t)
	nc, err := natsconn.Connect(url, "bucket-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := jetstream.KeyValueConfig{Bucket: "test-bucket", History: 1}
	if _, err := natsconn.Bucket(ctx, js, cfg, false); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("opening a missing bucket: %v; want jetstream.ErrBucketNotFound", err)
	}
	kv, err := natsconn.Bucket(ctx, js, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	cfg.History = 5
	if _, err := natsconn.Bucket(ctx, js, cfg, true); err != nil {
		t.Fatalf("creating it again with another history: %v", err)
	}
	kv, err = natsconn.Bucket(ctx, js, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 5 {
		t.Errorf("history %d; want 5: an existing bucket is updated to the configuration", st.History())
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Errorf("the value put before the update: %v; want it kept", err)
	}
}
