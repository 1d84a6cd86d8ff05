package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

func TestTheIntentLedgerIsProvisionedBesideTheStreams(t *testing.T) {
	t.Run("serve --no-provision with a CalDAV collection and no ledger bucket refuses to start and says to provision it", func(t *testing.T) {
		env := testenv.Start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// The streams and the consumer, as a provisioning user left them
		// before the ledger existed.
		if _, err := topology.SetUp(ctx, env.JS, topology.Config{}, topology.SetUpOptions{}); err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		err := run(ctx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1",
			"--task-service", "caldav", "--caldav-url", "http://127.0.0.1:1/tasks/"}, io.Discard, &errOut)
		if !errors.Is(err, ledger.ErrNoBucket) || !strings.Contains(err.Error(), "provision") {
			t.Errorf("serve: %v; want it to refuse for want of the ledger bucket, naming provision\n%s", err, errOut.String())
		}
		if _, err := env.JS.KeyValue(ctx, ledger.Bucket); err == nil {
			t.Error("serve --no-provision created the ledger bucket")
		}
	})
	t.Run("provision makes the ledger bucket with per-key TTLs, replicated like the streams", func(t *testing.T) {
		env := testenv.Start(t)
		var out bytes.Buffer
		if err := run(context.Background(), []string{"provision", "--server", env.URL()}, &out, io.Discard); err != nil {
			t.Fatalf("provision: %v", err)
		}
		if !strings.Contains(out.String(), "intent ledger "+ledger.Bucket+" ready") {
			t.Errorf("provision printed %q; want it to name the intent ledger", out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := ledger.Open(ctx, env.JS, ledger.Options{}); err != nil {
			t.Fatalf("after provision: %v", err)
		}
		kv, err := env.JS.KeyValue(ctx, ledger.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := env.JS.Stream(ctx, topology.ApprovalsStream)
		if err != nil {
			t.Fatal(err)
		}
		if st.LimitMarkerTTL() <= 0 || st.Config().Replicas != s.CachedInfo().Config.Replicas {
			t.Errorf("bucket: limit-marker TTL %v, replicas %d; want a TTL and the streams' %d replicas",
				st.LimitMarkerTTL(), st.Config().Replicas, s.CachedInfo().Config.Replicas)
		}
	})
}

func TestMaxBytesIsValidatedAndProvisionedOnEveryStream(t *testing.T) {
	for _, cmd := range []string{"serve", "provision"} {
		for _, bad := range []string{"0", "-2", "1000"} {
			err := run(context.Background(), []string{cmd, "--max-bytes", bad}, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--max-bytes") {
				t.Errorf("%s --max-bytes %s: %v, want a usage error naming --max-bytes", cmd, bad, err)
			}
		}
	}
	env := testenv.Start(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"provision", "--server", env.URL(), "--max-bytes", "8388608"}, &out, io.Discard); err != nil {
		t.Fatalf("provision: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{topology.ApprovalsStream, topology.ReceiptsStream, topology.DeadLetterStream} {
		s, err := env.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxBytes != 8<<20 || c.MaxMsgSize <= 0 {
			t.Errorf("%s: MaxBytes %d, MaxMsgSize %d; want 8 MiB and a size limit", name, c.MaxBytes, c.MaxMsgSize)
		}
	}
}
