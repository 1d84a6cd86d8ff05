package probe_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// An adapter's author probes their service through the public contract. This
// one keeps no keys: every call creates a task.
func Example() {
	var mu sync.Mutex
	n := 0
	forgetful := taskservice.Func(func(context.Context, taskservice.Request) (taskservice.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return taskservice.Result{Outcome: taskservice.Created, TaskID: fmt.Sprintf("task-%d", n)}, nil
	})
	target := probe.Target{Target: servicetest.Target{Name: "my task service", Service: forgetful, Scope: "the account"}}
	plan, err := probe.NewPlan(target, probe.Options{Options: servicetest.Options{Concurrency: 4, RunID: "example"}})
	if err != nil {
		panic(err)
	}
	// A command shows plan.String() and waits for consent here.
	rep, err := probe.Run(context.Background(), target, plan)
	if err != nil {
		panic(err)
	}
	fmt.Println(rep.Verdict.Headline)
	for _, r := range rep.Rows {
		fmt.Printf("%s: %s\n", r.Question, r.Status)
	}
	// Output:
	// unsafe for at-least-once delivery
	// second call, same key and body: unsafe
	// same key, different body: unsafe
	// N concurrent calls, one key: unsafe
	// a lost reply, then a retry: unknown
	// key remembered after the task is deleted: unknown
	// key scope: safe
	// a create seen by the next lookup: n/a
	// two plain creates, one key: n/a
}
