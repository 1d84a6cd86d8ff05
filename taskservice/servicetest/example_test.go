package servicetest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// memory is a task service that keeps its keys in memory, also after a
// task is deleted.
type memory struct {
	mu      sync.Mutex
	keys    map[[2]string]entry
	deleted map[string]bool
}

type entry struct{ digest, task string }

func newMemory() *memory {
	return &memory{keys: map[[2]string]entry{}, deleted: map[string]bool{}}
}

func (m *memory) Create(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{req.Scope, req.IntentID}
	if e, ok := m.keys[key]; ok {
		if e.digest != req.RequestDigest {
			return taskservice.Result{Outcome: taskservice.Conflict, TaskID: e.task, StoreID: "memory"}, nil
		}
		return taskservice.Result{Outcome: taskservice.Replayed, TaskID: e.task, StoreID: "memory", TaskDeleted: m.deleted[e.task]}, nil
	}
	task := fmt.Sprintf("task-%d", len(m.keys)+1)
	m.keys[key] = entry{req.RequestDigest, task}
	return taskservice.Result{Outcome: taskservice.Created, TaskID: task, StoreID: "memory"}, nil
}

func (m *memory) delete(_ context.Context, scope, intentID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[m.keys[[2]string{scope, intentID}].task] = true
	return nil
}

func (m *memory) count(_ context.Context, intentID string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, e := range m.keys {
		if k[1] == intentID && !m.deleted[e.task] {
			n++
		}
	}
	return n, nil
}

// An adapter's whole test is one call to Run.
func TestMemoryServiceKeepsTheContract(t *testing.T) {
	servicetest.Run(t, func(t *testing.T) servicetest.Target {
		m := newMemory()
		return servicetest.Target{Name: "memory", Service: m, Scope: "the process",
			Delete: m.delete, Count: m.count,
			// A restart keeps the map: the service stands for one with a durable store.
			Restart: func(context.Context) (taskservice.Service, error) { return m, nil }}
	}, servicetest.Features{Class: servicetest.KeepsKeys})
}

// Rows measures one row at a time, outside a test: the probe of a live
// service does so.
func ExampleRows() {
	rows, err := servicetest.NewRows(servicetest.Target{Service: newMemory(), Scope: "the process"},
		servicetest.Options{RunID: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{servicetest.RowRetry, servicetest.RowConflict, servicetest.RowConcurrent, servicetest.RowScope} {
		row := rows.Measure(context.Background(), id)
		fmt.Printf("%s: %s (%s)\n", row.Question, row.Answer, row.Status)
	}
	// Output:
	// second call, same key and body: first result (safe)
	// same key, different body: conflict, first kept (safe)
	// N concurrent calls, one key: 1 create (safe)
	// key scope: the process (safe)
}
