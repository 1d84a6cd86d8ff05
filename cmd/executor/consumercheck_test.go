package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// rewriteConsumer gives the executors' consumer another filter and a
// budget of one, as the operator role could through the legacy create
// subject, without touching the record of what was provisioned.
func rewriteConsumer(t *testing.T, env *testenv.Env) {
	t.Helper()
	testenv.ChangeConsumer(t, env.JS, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
}

func TestServeWithNoProvisionRefusesAConsumerRewrittenBehindProvisioningsBack(t *testing.T) {
	env := testenv.Start(t)
	rewriteConsumer(t, env)
	var errOut testenv.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1"}, io.Discard, &errOut)
	if err == nil {
		t.Fatal("serve consumed from a rewritten consumer")
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	expectLines(t, "the refusal", err.Error(),
		`consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`,
		"consumer executor: max_deliver: expected -1, found 1", "executor provision")
}

func TestServeStopsWhenItsConsumerIsRewrittenWhileItRuns(t *testing.T) {
	env := testenv.Start(t)
	var errOut testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--no-provision", "--id", "exec-1",
			"--consumer-check", "1s"}, io.Discard, &errOut)
	}()
	s := testenv.Seed(t)
	rc, err := demo.SendAndWait(context.Background(), env.JS, s.Original.Envelope(), 30*time.Second)
	if err != nil {
		t.Fatalf("sending before the rewrite: %v\n%s", err, errOut.String())
	}
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("outcome %s before the rewrite", rc.Outcome)
	}
	rewriteConsumer(t, env)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve kept running on a rewritten consumer")
	}
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "max_deliver: expected -1, found 1") {
		t.Fatalf("serve ended with %v (exit status %d); want exit status 1 naming max_deliver", err, exitCode(err))
	}
	if !strings.Contains(errOut.String(), "level=ERROR") || !strings.Contains(errOut.String(), "the consumer was changed since it was provisioned") {
		t.Fatalf("no ERROR about the consumer in the log:\n%s", errOut.String())
	}
}

func TestServeRefusesAConsumerCheckOfLessThanASecond(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--server", "nats://127.0.0.1:1", "--insecure-allow-unsigned", "--consumer-check", "10ms"}, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--consumer-check 10ms: want at least 1s") {
		t.Fatalf("err %v (exit status %d); want a usage error", err, exitCode(err))
	}
}
