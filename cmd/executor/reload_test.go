package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestARevokedReviewersApprovalIsRejectedAtSignatureAfterSIGHUPWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted-approvers.json")
	reviewer := scenario.TestKey()
	other, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WriteTrusted(trusted, sign.ApproverFor(scenario.Reviewer, reviewer.Public()), sign.ApproverFor("reviewer-2", other.Public())); err != nil {
		t.Fatal(err)
	}
	p := serveEmbedded(t, "--trusted-approvers", trusted, "--id", "exec-reload", "--log-level", "info")
	_, js := testenv.Connect(t, p.url)
	seed, err := scenario.BuildSigned(reviewer, time.Now().UTC().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var rc *document.Receipt
	waitFor(t, 30*time.Second, "a receipt for the trusted reviewer's approval", func() bool {
		rc, err = demo.SendAndWait(context.Background(), js, seed.Original.Envelope(), 5*time.Second)
		return err == nil
	})
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the trusted reviewer's approval: %s %+v, want created", rc.Outcome, rc.Rejection)
	}

	// Revoke reviewer-1: the file now names reviewer-2 only.
	if err := sign.WriteTrusted(trusted, sign.ApproverFor("reviewer-2", other.Public())); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reload to be logged", func() bool {
		return strings.Contains(p.log.String(), "trusted approvers reloaded")
	})
	logged := p.log.String()
	if !strings.Contains(logged, scenario.Reviewer+" ("+reviewer.ID+", scopes default)") || !strings.Contains(logged, "removed") {
		t.Errorf("the reload does not log the removed reviewer:\n%s", logged)
	}
	rc, err = demo.SendAndWait(context.Background(), js, seed.NewIntent.Envelope(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Outcome != document.OutcomeRejected || rc.Rejection.Check != "signature" {
		t.Fatalf("the revoked reviewer's new approval: %s %+v, want rejected at signature", rc.Outcome, rc.Rejection)
	}

	// A file that does not load keeps the approvers loaded before.
	if err := os.WriteFile(trusted, []byte(`{"approvers":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the failed reload to be logged", func() bool {
		return strings.Contains(p.log.String(), "reloading the trusted approvers failed")
	})
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("serve stopped after a failed reload: %v", err)
	default:
	}
}

func TestAReloadOfAFileThatDoesNotLoadKeepsTheApproversLoadedBefore(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "trusted.json")
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	if err := sign.WriteTrusted(p, sign.ApproverFor("alice", k1.Public())); err != nil {
		t.Fatal(err)
	}
	keys, err := sign.LoadTrusted(p)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := sign.WriteTrusted(p, sign.ApproverFor("bob", k2.Public())); err != nil {
		t.Fatal(err)
	}
	if err := serve.ReloadTrusted(p, keys, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `added="[bob (`+k2.ID+`, scopes default)]"`) || !strings.Contains(logs.String(), `removed="[alice (`+k1.ID+`, scopes default)]"`) {
		t.Errorf("the reload log does not name who was added and removed:\n%s", logs.String())
	}
	if err := os.WriteFile(p, []byte(`{"approvers":[{"name":"x"}]} trailing`), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := serve.ReloadTrusted(p, keys, log); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if _, err := keys.Lookup(k2.ID); err != nil || keys.Len() != 1 {
		t.Fatalf("after a failed reload: %d approvers, bob %v; want bob kept", keys.Len(), err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), p) {
		t.Errorf("the failed reload is not logged as an error naming the file:\n%s", logs.String())
	}
}
