package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// serve sets up the streams and the consumer once at start: by the time it
// consumes, provisioning has been recorded once (each setting-up records
// what the server applied, and the record keeps its history).
func TestServeSetsUpTheStreamsAndTheConsumerOnce(t *testing.T) {
	p := serveEmbedded(t, "--insecure-allow-unsigned")
	waitFor(t, 30*time.Second, "serve to consume", func() bool { return strings.Contains(p.log.String(), `msg=consuming`) })
	_, js := testenv.Connect(t, p.url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, topology.RecordBucket)
	if err != nil {
		t.Fatal(err)
	}
	history, err := kv.History(ctx, topology.RecordKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 1 {
		t.Errorf("serve set up the streams and the consumer %d times at start, want once", len(history))
	}
}
