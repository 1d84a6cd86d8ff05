package console_test

import (
	"net/http"
	"testing"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// TestSignedApprovals: with a key, the console's approvals pass an executor
// that accepts only signed approvals from trusted reviewers.
func TestSignedApprovals(t *testing.T) {
	env := testenv.Start(t)
	key := scenario.TestKey()
	kr, err := sign.NewKeyring(sign.ApproverFor("reviewer-1", key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.Key = key })
	p := s.get(t, press(t, s, approveForm("reviewer-1"))+"?wait=1")
	p.expect(t, http.StatusOK, `data-state="created"`)
	if c := env.Counts(); c.CreatesExecuted != 1 {
		t.Fatalf("counters %+v, want one create", c)
	}
}
