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
)

func TestAnEmbeddedExecutorWhoseTaskServiceLosesItsLeaseStops(t *testing.T) {
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--embedded", "--insecure-allow-unsigned", "--data", filepath.Join(t.TempDir(), "data"),
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn"}, &bytes.Buffer{}, &stderr)
	}()
	var kv jetstream.KeyValue
	waitFor(t, 30*time.Second, "the embedded task service's lease", func() bool {
		nc, err := nats.Connect(url)
		if err != nil {
			return false
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
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
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the embedded task service stopped serving") || !strings.Contains(err.Error(), "store-0000000000000bad") {
			t.Fatalf("serve ended with %v; want an error saying the task service stopped, naming the new holder\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve kept running after its task service lost the lease\n%s", stderr.String())
	}
}
