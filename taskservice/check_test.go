package taskservice_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/taskservice"
)

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
