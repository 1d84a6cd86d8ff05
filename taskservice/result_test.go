package taskservice_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

func TestNotCreatedMarksAnErrorThroughWrapping(t *testing.T) {
	cause := errors.New("refused")
	for _, c := range []struct {
		name       string
		err        error
		notCreated bool
		permanent  bool
	}{
		{"a permanent error that created nothing is both", taskservice.Permanent(taskservice.NotCreated(cause)), true, true},
		{"the mark survives wrapping with %w", fmt.Errorf("calling: %w", taskservice.Permanent(taskservice.NotCreated(cause))), true, true},
		{"a plain permanent error is not marked", taskservice.Permanent(cause), false, true},
		{"a transient error is not marked", taskservice.Transient(cause), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := taskservice.IsNotCreated(c.err); got != c.notCreated {
				t.Errorf("IsNotCreated = %v, want %v", got, c.notCreated)
			}
			if got := taskservice.IsPermanent(c.err); got != c.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, c.permanent)
			}
			if !errors.Is(c.err, cause) || c.err.Error() == "" {
				t.Errorf("the cause is lost: %v", c.err)
			}
		})
	}
	if taskservice.NotCreated(nil) != nil {
		t.Error("NotCreated(nil) is not nil")
	}
}

func TestCheckHoldsAResultToTheContractsForm(t *testing.T) {
	for _, c := range []struct {
		name string
		res  taskservice.Result
		ok   bool
	}{
		{"a created result with a task id keeps it", taskservice.Result{Outcome: taskservice.Created, TaskID: "t-1"}, true},
		{"a replay of a deleted task keeps it", taskservice.Result{Outcome: taskservice.Replayed, TaskID: "t-1", TaskDeleted: true}, true},
		{"a result without a task id breaks it", taskservice.Result{Outcome: taskservice.Replayed}, false},
		{"an unknown outcome breaks it", taskservice.Result{Outcome: "maybe", TaskID: "t-1"}, false},
		{"a create that says its task was deleted breaks it", taskservice.Result{Outcome: taskservice.Created, TaskID: "t-1", TaskDeleted: true}, false},
		{"a conflict that says its task was deleted breaks it", taskservice.Result{Outcome: taskservice.Conflict, TaskID: "t-1", TaskDeleted: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := taskservice.Check(c.res); (err == nil) != c.ok {
				t.Fatalf("Check = %v, want ok %v", err, c.ok)
			}
		})
	}
}

func TestAnInDoubtErrorIsTransientAndSaysUntilWhen(t *testing.T) {
	until := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	err := fmt.Errorf("calling: %w", taskservice.InDoubt(errors.New("the POST's answer was lost"), until))
	if !errors.Is(err, taskservice.ErrInDoubt) || !errors.Is(err, taskservice.ErrTransient) || taskservice.IsPermanent(err) {
		t.Fatalf("%v: want ErrInDoubt and ErrTransient, not permanent", err)
	}
	got, ok := taskservice.InDoubtUntil(err)
	if !ok || !got.Equal(until) {
		t.Errorf("InDoubtUntil = %v, %v; want %v, true", got, ok, until)
	}
	if _, ok := taskservice.InDoubtUntil(taskservice.Transient(errors.New("x"))); ok {
		t.Error("a plain transient error says it is in doubt")
	}
	if taskservice.InDoubt(nil, until) != nil {
		t.Error("InDoubt(nil) is not nil")
	}
}
