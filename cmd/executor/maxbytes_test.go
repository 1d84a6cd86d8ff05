package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

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
