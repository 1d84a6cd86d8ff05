package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
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
	publish.PrintReceipt(&out, rc)
	text := out.String()
	for _, want := range append([]string{"dead_lettered after 5 attempt(s): task service call failed on delivery 5 of 5"}, advice...) {
		if !strings.Contains(text, want) {
			t.Errorf("the dead_lettered receipt reads without %q:\n%s", want, text)
		}
	}
}

func TestADeadLetterThatCreatedNothingDoesNotPromiseThatAResendHelps(t *testing.T) {
	t.Parallel()
	rc, err := send.ParseReceipt(readFile(t, "../../testdata/receipts/dead_lettered.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc.Failure.Reason = "task service refused the call: caldav: a task with the UID this intent's task would have is already in the collection; " +
		document.DeadLetterNothingCreated
	var out bytes.Buffer
	publish.PrintReceipt(&out, rc)
	text := out.String()
	if !strings.Contains(text, document.DeadLetterNothingCreated) {
		t.Errorf("the receipt reads without its reason's ending:\n%s", text)
	}
	for _, unwanted := range advice {
		if strings.Contains(text, unwanted) {
			t.Errorf("the receipt still says %q:\n%s", unwanted, text)
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

// A send waits for its receipt without a consumer: as a user that may
// create none, and on a server whose RECEIPTS stream has no consumer left
// to give, it sends twice and prints created, then replayed.
func TestSendWaitsForItsReceiptWithoutAConsumer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (env *testenv.Env, url string)
	}{
		{"as a publisher that may create no consumer", func(t *testing.T) (*testenv.Env, string) {
			env := testenv.StartNoConsumers(t)
			return env, env.PublisherURL()
		}},
		{"while RECEIPTS has used up its consumers", func(t *testing.T) (*testenv.Env, string) {
			env := testenv.Start(t)
			env.LimitConsumers(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := env.JS.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "squatter"}); err != nil {
				t.Fatal(err)
			}
			if _, err := env.JS.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "another"}); err == nil {
				t.Fatal("RECEIPTS took a second consumer past its limit of one")
			}
			return env, env.URL()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, url := tc.start(t)
			env.Executor(executor.Config{ID: "exec-1"})
			for _, want := range []string{"created: task fake-task-0001", "replayed: the same task fake-task-0001"} {
				r := publisher(t, nil, seedOriginal.args("send", "--server", url, "--wait", "30s")...)
				r.expect(t, exitOK)
				if !strings.HasPrefix(r.stdout, want) {
					t.Fatalf("send printed %q, want %q first\nstderr:\n%s", r.stdout, want, r.stderr)
				}
			}
		})
	}
}

// A send that published but whose wait fails, for whatever reason, says
// that the message was published and that sending again is safe, and ends
// with status 6; the message is stored.
func TestSendThatPublishedButGotNoReceiptSaysSoAndEndsWith6(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With the RECEIPTS stream gone, no receipt can be read.
	if err := env.JS.DeleteStream(ctx, topology.ReceiptsStream); err != nil {
		t.Fatal(err)
	}
	before := approvalsState(t, env)
	r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "2s")...)
	r.expect(t, exitNoAnswer)
	after := approvalsState(t, env)
	if after.LastSeq != before.LastSeq+1 {
		t.Fatalf("APPROVALS went from %d to %d messages; want the one sent", before.LastSeq, after.LastSeq)
	}
	for _, want := range []string{fmt.Sprintf("published as APPROVALS message %d; no receipt: ", after.LastSeq),
		"no stream RECEIPTS allowing direct gets answers $JS.API.DIRECT.GET.RECEIPTS.receipts.default.intent-0001",
		"sending again is safe"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
