package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

func TestServeRefusesToStartWithoutATrustPolicy(t *testing.T) {
	_, _, err := runCLI(context.Background(), "serve", "--server", "nats://127.0.0.1:1")
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

func TestVerifyCommandFailsOnADirectCreateUnlessCallsFromOutsideAreAllowed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := demo.SendAndWait(ctx, env.JS, s.Original.Envelope(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	v, err := gate.CheckBindings(s.NewIntent.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	// A request of its own for an intent no approval names, as the
	// service requires of every create.
	q := *v.Request
	q.IntentID = "intent-outside"
	doc, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	req, err := provider.RequestFor(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Service.Create(ctx, req); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runCLI(context.Background(), "verify", "--server", env.URL())
	if err == nil {
		t.Fatalf("verify passed after a direct create:\n%s", out)
	}
	expectLines(t, "the report", out, "window: APPROVALS sequences 1 to 1, 1 messages", "FAIL 7.", "came from outside the executors")
	// No executor ran serve here, so nothing recorded the service: verify
	// says that it takes the fake one.
	if want := "no record of the executors' task service"; !strings.Contains(errOut, want) {
		t.Errorf("verify without a record does not say %q:\n%s", want, errOut)
	}

	out, errOut, err = runCLI(context.Background(), "verify", "--server", env.URL(), "--allow-external", "1", "--json")
	if err != nil {
		t.Fatalf("verify --allow-external 1: %v\n%s%s", err, out, errOut)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Window.FirstSeq != 1 || rep.Window.LastSeq != 1 || rep.Window.Messages != 1 || len(rep.Checks) != 14 ||
		rep.Service.StoreID != env.Stack.Store.ID() {
		t.Fatalf("report %+v", rep)
	}
	if got := strings.Join(rep.Gate.NotChecked, ","); got != "signature,expiry,scope" {
		t.Errorf("without trusted approvers, not checked %q", got)
	}
}

func TestVerifyCommandRefusesUnsignedAllowedWithoutTrustedApprovers(t *testing.T) {
	_, _, err := runCLI(context.Background(), "verify", "--insecure-allow-unsigned")
	if err == nil || !strings.Contains(err.Error(), "needs --trusted-approvers") {
		t.Fatalf("err %v", err)
	}
}
