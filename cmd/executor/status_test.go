package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// sendSeedCreated sends the seed's original request and fails the test
// unless its receipt says created.
func sendSeedCreated(t *testing.T, env *testenv.Env) {
	t.Helper()
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent, err := testenv.Publish(ctx, env.JS, s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	if rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("receipt %s, want created", rc.Outcome)
	}
}

// stackWithOneCreatedReceipt starts a stack, has an executor carry out the
// seed approval once and stops the executor.
func stackWithOneCreatedReceipt(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.Start(t)
	_, stop := env.Executor(executor.Config{ID: "exec-1"})
	sendSeedCreated(t, env)
	stop()
	return env
}

func TestStatusPrintsTheCountersTheConsumerAndTheReceipts(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut); err != nil {
		t.Fatalf("status: %v\n%s%s", err, out.String(), errOut.String())
	}
	expectLines(t, "status", out.String(),
		"task service: requests received 1, creates executed 1, tasks existing 1",
		"consumer:     pending 0, ack pending 0",
		"receipts:     created 1 replayed 0")
}

func TestStatusShowsTheKeysAndEachScopesCountersWhenThereIsMoreThanOneScope(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	status := func(t *testing.T) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut); err != nil {
			t.Fatalf("status: %v\n%s%s", err, out.String(), errOut.String())
		}
		return out.String()
	}
	t.Run("with one scope, the keys and no scope lines", func(t *testing.T) {
		out := status(t)
		if !strings.Contains(out, "keys:         live 1, compacted 0; tasks deleted 0") || strings.Contains(out, "  scope ") {
			t.Errorf("status with one scope:\n%s", out)
		}
	})
	t.Run("with two scopes and a deleted task, each scope's counters", func(t *testing.T) {
		env.Executor(executor.Config{ID: "exec-1"})
		s := testenv.Seed(t)
		teamB, err := s.InScope(s.Original, "team-b")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sent, err := testenv.Publish(ctx, env.JS, teamB.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		rc, err := testenv.WaitReceipt(ctx, env.JS, sent.Scope, sent.IntentID, sent.StreamSeq)
		if err != nil || rc.Outcome != document.OutcomeCreated {
			t.Fatalf("team-b's receipt %+v, %v; want created", rc, err)
		}
		if _, err := env.Service.Delete(ctx, provider.DeleteRequest{Scope: "team-b", IntentID: "intent-0001"}); err != nil {
			t.Fatal(err)
		}
		out := status(t)
		expectLines(t, "status", out,
			"task service: requests received 2, creates executed 2, tasks existing 1",
			"keys:         live 2, compacted 0; tasks deleted 1",
			"  scope default: requests received 1, creates executed 1, tasks existing 1; keys live 1, compacted 0; tasks deleted 0",
			"  scope team-b: requests received 1, creates executed 1, tasks existing 0; keys live 1, compacted 0; tasks deleted 1",
		)
	})
}

func TestStatusWithTheTaskServiceDownStillShowsTheStreamAndConsumerFigures(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	t.Run("as text, and the exit status is 1", func(t *testing.T) {
		var out, errOut bytes.Buffer
		start := time.Now()
		err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut)
		if exitCode(err) != 1 || !errors.Is(err, errSilent) {
			t.Fatalf("status ended with %v (exit %d), want exit 1 with the explanation already printed", err, exitCode(err))
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("status took %s with the service down", took)
		}
		expectLines(t, "status", out.String(),
			"task service: did not answer (",
			"its counters are unknown",
			"consumer:     pending 0, ack pending 0",
			"receipts:     created 1 replayed 0")
	})
	t.Run("as JSON, the counters are null and the service error says why", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"status", "--server", env.URL(), "--json"}, &out, &errOut)
		if exitCode(err) != 1 {
			t.Fatalf("status --json ended with %v, want exit 1", err)
		}
		var rep map[string]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("status --json printed %q: %v", out.String(), err)
		}
		if string(rep["counts"]) != "null" {
			t.Errorf("counts = %s, want null", rep["counts"])
		}
		var why string
		if err := json.Unmarshal(rep["service_error"], &why); err != nil || why == "" {
			t.Errorf("service_error = %s, want the reason", rep["service_error"])
		}
		var consumer struct {
			Pending    *uint64 `json:"pending"`
			AckPending *int    `json:"ack_pending"`
		}
		if err := json.Unmarshal(rep["consumer"], &consumer); err != nil || consumer.Pending == nil || consumer.AckPending == nil {
			t.Errorf("consumer = %s, want its figures", rep["consumer"])
		}
		var receipts map[string]int64
		if err := json.Unmarshal(rep["receipts"], &receipts); err != nil || receipts[document.OutcomeCreated] != 1 {
			t.Errorf("receipts = %s, want one created", rep["receipts"])
		}
	})
}

func TestStatusRefusesANonPositiveServiceTimeout(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"status", "--server", "nats://127.0.0.1:1", "--service-timeout", "0s"}, &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--service-timeout must be positive") {
		t.Fatalf("status --service-timeout 0s: %v, want a usage error naming the flag", err)
	}
}

func TestStatusGivesUpOnATaskServiceThatTakesTheCallButNeverAnswers(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	// Something takes the stats call and never answers.
	sub, err := env.NC.Subscribe(provider.SubjectStats, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	err = run(context.Background(), []string{"status", "--server", env.URL(), "--service-timeout", "300ms"}, &out, &errOut)
	took := time.Since(start)
	if exitCode(err) != 1 || !strings.Contains(out.String(), "task service: did not answer") {
		t.Fatalf("status ended with %v:\n%s", err, out.String())
	}
	if took > 5*time.Second {
		t.Errorf("status took %s; --service-timeout 300ms should bound the wait", took)
	}
	if !strings.Contains(out.String(), "receipts:     created 1") {
		t.Errorf("status lacks the receipts:\n%s", out.String())
	}
}
