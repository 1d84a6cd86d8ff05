package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

func sendCmd(args ...string) (stdout, stderr string, err error) {
	return runCLI(context.Background(), append([]string{sendCommand}, args...)...)
}

func TestSendPublishesAStoredEnvelopeTwiceAndTheSecondReceiptSaysReplayed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	file := filepath.Join(t.TempDir(), "envelope.json")
	if err := os.WriteFile(file, s.Original.Envelope(), 0o600); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := sendCmd("--server", env.URL(), "--envelope", file, "--json")
	if err != nil {
		t.Fatalf("send --json: %v\n%s", err, errOut)
	}
	rc, err := document.DecodeReceipt([]byte(strings.TrimSpace(out)))
	if err != nil || rc.Outcome != document.OutcomeCreated || rc.TaskID == nil {
		t.Fatalf("first send: receipt %+v, %v; want created\n%s", rc, err, out)
	}

	out, errOut, err = sendCmd("--server", env.URL(), "--envelope", file)
	if err != nil {
		t.Fatalf("send: %v\n%s", err, errOut)
	}
	for _, want := range []string{"replayed: task " + *rc.TaskID, "intent intent-0001", "delivery 1",
		"requests received 2, creates executed 1, tasks existing 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second send printed %q, which lacks %q", out, want)
		}
	}
	if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("the task service counts %+v, want 2, 1, 1", c)
	}
}

func TestSendRefusesWhatIsNotAnEnvelopeAndPublishesNothing(t *testing.T) {
	s := testenv.Seed(t)
	file := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(file, s.Original.Request, 0o600); err != nil {
		t.Fatal(err)
	}
	// No server listens there: the file is refused before any connection.
	_, _, err := sendCmd("--server", "nats://127.0.0.1:1", "--envelope", file)
	if !errors.Is(err, send.ErrNotEnvelope) || exitCode(err) != 1 || !strings.Contains(err.Error(), "nothing published") {
		t.Fatalf("send of a task request: %v (exit %d), want ErrNotEnvelope, exit 1", err, exitCode(err))
	}
}

func TestSendHelpAndUsage(t *testing.T) {
	out, errOut, err := sendCmd("--help")
	if exitCode(err) != 0 {
		t.Fatalf("send --help: %v", err)
	}
	help := strings.Join(strings.Fields(errOut+out), " ")
	expectLines(t, "send --help", help,
		"send --envelope FILE", "byte for byte", "second receipt says replayed", "publisher send",
		"-wait", "-json", "Exit status: 0")
	if _, _, err := sendCmd(); exitCode(err) != 2 || !strings.Contains(err.Error(), "--envelope is required") {
		t.Errorf("send without --envelope: %v (exit %d), want a usage error", err, exitCode(err))
	}
	var usageOut bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &usageOut, &usageOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(usageOut.String(), "executor send --envelope FILE") {
		t.Errorf("executor --help does not list send:\n%s", usageOut.String())
	}
	if strings.Contains(usageOut.String(), "demo-send") {
		t.Errorf("executor --help names the removed demo-send:\n%s", usageOut.String())
	}
}

// A send that published but got no receipt, for whatever reason, says that
// the message was published and that sending again is safe, and ends with
// status 6.
func TestSendThatPublishedButGotNoReceiptSaysSoAndEndsWith6(t *testing.T) {
	s := testenv.Seed(t)
	file := filepath.Join(t.TempDir(), "envelope.json")
	if err := os.WriteFile(file, s.Original.Envelope(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, env *testenv.Env)
		wait  string
		want  string
	}{
		{"no executor: the wait ends first", func(*testing.T, *testenv.Env) {}, "500ms", "no receipt: none within 500ms"},
		{"the RECEIPTS stream is gone: no receipt can be read", func(t *testing.T, env *testenv.Env) {
			if err := env.JS.DeleteStream(context.Background(), topology.ReceiptsStream); err != nil {
				t.Fatal(err)
			}
		}, "2s", "no receipt: none within 2s (the last read of the stored receipts failed: send: reading stored receipts on receipts.default.intent-0001: " +
			"nats: no responders available for request (no stream RECEIPTS allowing direct gets answers $JS.API.DIRECT.GET.RECEIPTS.receipts.default.intent-0001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			tc.spoil(t, env)
			_, _, err := sendCmd("--server", env.URL(), "--envelope", file, "--wait", tc.wait)
			if exitCode(err) != 6 || !errors.Is(err, send.ErrNoReceipt) {
				t.Fatalf("send: %v (exit %d), want exit 6", err, exitCode(err))
			}
			for _, want := range []string{"published as APPROVALS message 1; ", tc.want, "sending again is safe"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestExecutorSendPrintsTheScopeAndADeletedTask(t *testing.T) {
	for _, c := range []struct {
		name      string
		r         send.Receipt
		want, not string
	}{
		{"a replay of a deleted task in team-a names both",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "team-a", TaskDeleted: true},
			"replayed: task fake-task-0001, intent intent-0001 in scope team-a, stream message 7, delivery 1; the task was deleted since, nothing was created again", ""},
		{"a replay in default reads as before",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "default"},
			"replayed: task fake-task-0001, intent intent-0001, stream message 7, delivery 1\n", "scope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.r.Delivery.Delivered = 1
			var b bytes.Buffer
			publish.PrintSentReceipt(&b, send.Sent{StreamSeq: 7}, &c.r)
			if !strings.HasPrefix(b.String(), c.want) || (c.not != "" && strings.Contains(b.String(), c.not)) {
				t.Fatalf("printed %q, want %q and no %q", b.String(), c.want, c.not)
			}
		})
	}
}
