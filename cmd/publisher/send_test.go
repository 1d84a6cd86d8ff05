package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/send"
)

// advice is what a dead_lettered send must say besides the failure.
var advice = []string{"whether the task was created is unknown", "sending the same approval again is safe and will say"}

func TestADeadLetteredReceiptReadsAsAnUnknownOutcomeThatIsSafeToResend(t *testing.T) {
	t.Parallel()
	rc, err := send.ParseReceipt(readFile(t, "../../testdata/receipts/dead_lettered.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printReceipt(&out, rc)
	text := out.String()
	for _, want := range append([]string{"dead_lettered after 5 attempt(s): task service call failed on delivery 5 of 5"}, advice...) {
		if !strings.Contains(text, want) {
			t.Errorf("the dead_lettered receipt reads without %q:\n%s", want, text)
		}
	}
}

func TestSendWithTheTaskServiceDownSaysTheOutcomeIsUnknownAndTheResendSaysCreated(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", CallTimeout: 200 * time.Millisecond})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "45s")...)
	r.expect(t, exitDead)
	for _, want := range append([]string{"dead_lettered after 4 attempt(s)"}, advice...) {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("send printed without %q:\n%s", want, r.stdout)
		}
	}
	env.RestartService("provider")
	again := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "45s")...)
	again.expect(t, exitOK)
	if !strings.HasPrefix(again.stdout, "created: task fake-task-0001 for intent intent-0001") {
		t.Errorf("the resend printed:\n%s", again.stdout)
	}
}

func TestSendHelpSaysADeadLetteredOutcomeIsSafeToResend(t *testing.T) {
	t.Parallel()
	r := publisher(t, nil, "send", "--help")
	r.expect(t, exitOK)
	help := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
	if want := "5 dead_lettered (whether the task was created is unknown; sending again is safe and will say)"; !strings.Contains(help, want) {
		t.Errorf("send --help lacks %q:\n%s", want, help)
	}
}
