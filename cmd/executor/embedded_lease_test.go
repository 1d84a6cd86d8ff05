package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// inProcess is "executor serve --embedded" running in this test's process.
type inProcess struct {
	url  string
	data string     // the --data directory serveEmbedded gave it
	done chan error // run's result, once it returns
	log  *syncBuffer
}

// serveEmbedded runs "executor serve --embedded" with args on a free port
// and a data directory of the test's, in this process, and waits until its
// server accepts connections. Cleanup stops it.
func serveEmbedded(t *testing.T, args ...string) *inProcess {
	t.Helper()
	port := freePort(t)
	p := &inProcess{url: fmt.Sprintf("nats://127.0.0.1:%d", port), data: filepath.Join(t.TempDir(), "data"), done: make(chan error, 1), log: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		p.done <- run(ctx, append([]string{"serve", "--embedded", "--data", p.data,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...), &bytes.Buffer{}, p.log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("executor output:\n%s", p.log.String())
		}
	})
	waitFor(t, 30*time.Second, "the embedded server", func() bool {
		nc, err := nats.Connect(p.url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return p
}

func TestAnEmbeddedExecutorWhoseTaskServiceLosesItsLeaseStops(t *testing.T) {
	p := serveEmbedded(t, "--insecure-allow-unsigned", "--log-level", "warn")
	_, js := testenv.Connect(t, p.url)
	var kv jetstream.KeyValue
	var err error
	waitFor(t, 30*time.Second, "the embedded task service's lease", func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		kv, err = js.KeyValue(c, provider.LeaseBucket)
		if err != nil {
			return false
		}
		_, err = kv.Get(c, provider.LeaseKey)
		return err == nil
	})
	// Another store takes the lease, as a second instance would once this
	// one's renewals stopped reaching the server.
	thief, _ := json.Marshal(provider.LeaseHolder{StoreID: "store-0000000000000bad", Instance: "thief", Host: "elsewhere", PID: 9})
	if _, err := kv.Put(context.Background(), provider.LeaseKey, thief); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err == nil || !strings.Contains(err.Error(), "the embedded task service stopped serving") || !strings.Contains(err.Error(), "store-0000000000000bad") {
			t.Fatalf("serve ended with %v; want an error saying the task service stopped, naming the new holder\n%s", err, p.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve kept running after its task service lost the lease\n%s", p.log.String())
	}
}
