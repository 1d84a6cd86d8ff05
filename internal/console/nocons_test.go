package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/sendtwice/sendtwice/internal/console"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// A console connected as a publisher that may create no consumer shows the
// receipt of each send: created, then replayed; the server refused it
// nothing.
func TestAConsoleThatMayCreateNoConsumerShowsItsReceipts(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	env.Executor(executor.Config{ID: "exec-1"})
	js, violations := env.ConnectPublisher()
	s := startConsole(t, env, copyFixtures(t), func(c *console.Config) { c.JetStream = js })
	first := press(t, s, approveForm("reviewer-1"))
	s.get(t, first+"?wait=1").expect(t, http.StatusOK, `data-state="created"`)
	second := press(t, s, url.Values{})
	s.get(t, second+"?wait=1").expect(t, http.StatusOK, `data-state="replayed"`)
	if v := violations.Seen(); len(v) > 0 {
		t.Errorf("the server refused the console: %v", v)
	}
}
