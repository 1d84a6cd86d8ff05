package executor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

// A dead letter promises that a resend is safe and will say what happened
// only when the outcome is unknown. A service that refuses the call knowing
// that it created nothing (a CalDAV UID clash, a resource not its own)
// marks its error NotCreated: the dead letter then says that a resend is
// refused the same way until the cause is fixed.
func TestADeadLetterPromisesAResendOnlyWhenTheOutcomeIsUnknown(t *testing.T) {
	const why = "another resource in the collection holds the task's UID"
	for _, c := range []struct {
		name    string
		err     error
		says    []string
		saysNot string
	}{
		{"a plain permanent refusal says the task may exist and a resend is safe",
			taskservice.Permanent(errors.New(why)),
			[]string{why, "may or may not have been created", "sending the same approval again is safe and will say which"},
			"refused the same way"},
		{"a refusal that created nothing says a resend is refused until the cause is fixed",
			taskservice.Permanent(taskservice.NotCreated(errors.New(why))),
			[]string{why, "this call created nothing", "sending the same approval again will be refused the same way until the cause above is fixed"},
			"is safe"},
		{"a refusal that created nothing keeps its ending whole however long its reason",
			taskservice.Permanent(taskservice.NotCreated(errors.New(why + strings.Repeat(", and more", 600)))),
			[]string{why, "…; " + document.DeadLetterNothingCreated},
			"is safe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			svc := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
				return taskservice.Result{}, c.err
			})
			var log testenv.Buffer
			env.Executor(executor.Config{ID: "exec-refused", TaskService: svc, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			seq := sendOnly(t, env.JS, seed(t).Original.Envelope())
			rs := receiptsFor(t, env, seq, 20*time.Second)
			if len(rs) != 1 || rs[0].Outcome != document.OutcomeDeadLettered || rs[0].Failure == nil {
				t.Fatalf("receipts %+v; want one dead_lettered", rs)
			}
			reason := rs[0].Failure.Reason
			t.Logf("reason: %.300s", reason)
			for _, w := range c.says {
				if !strings.Contains(reason, w) {
					t.Errorf("the dead letter's reason does not say %q", w)
				}
			}
			if strings.Contains(reason, c.saysNot) {
				t.Errorf("the dead letter's reason says %q", c.saysNot)
			}
			if !strings.Contains(log.String(), why) {
				t.Errorf("the log does not give the reason:\n%s", log.String())
			}
		})
	}
}
