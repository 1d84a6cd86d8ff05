package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestServeRefusesToStartWithoutATrustPolicy(t *testing.T) {
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"serve", "--server", "nats://127.0.0.1:1"}, io.Discard, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--trusted-approvers") || !strings.Contains(err.Error(), "--insecure-allow-unsigned") {
		t.Fatalf("serve without a trust policy: %v, want a usage error naming both flags", err)
	}
}

func TestServeWithTrustedApproversAcceptsOnlySignedApprovals(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	cmd := exec.Command(os.Args[0], "serve", "--embedded", "--data", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", "exec-trust", "--log-level", "warn",
		"--trusted-approvers", filepath.Join("..", "..", "testdata", "signed", "trusted-approvers.json"))
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE=atexit_sleep_ms=0")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("executor output:\n%s", out.String())
		}
	})
	var nc *nats.Conn
	waitFor(t, 30*time.Second, "the embedded server", func() bool {
		var err error
		nc, err = nats.Connect(url)
		return err == nil
	})
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	signed, err := scenario.BuildSigned(scenario.TestKey(), now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unsigned := testenv.Seed(t)
	var rc *document.Receipt
	waitFor(t, 30*time.Second, "a receipt for the unsigned approval", func() bool {
		rc, err = demo.SendAndWait(context.Background(), js, unsigned.Original.Envelope(), 5*time.Second)
		return err == nil
	})
	if rc.Outcome != document.OutcomeRejected || rc.Rejection.Check != "signature" {
		t.Fatalf("unsigned approval: %s %+v, want rejected at signature", rc.Outcome, rc.Rejection)
	}
	rc, err = demo.SendAndWait(context.Background(), js, signed.Original.Envelope(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("signed approval: %s %+v, want created", rc.Outcome, rc.Rejection)
	}
}
