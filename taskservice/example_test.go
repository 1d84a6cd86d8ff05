package taskservice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sendtwice/sendtwice/taskservice"
)

// memoryService keeps the contract in memory: one task per intent id,
// compared by the request digest. An adapter for a real system does the
// same with that system's own create-if-absent (a unique key, a
// conditional write, an idempotency key).
type memoryService struct {
	mu    sync.Mutex
	tasks map[string]binding // by intent id
	next  int
}

type binding struct {
	digest, taskID string
}

func (s *memoryService) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	if req.IntentID == "" {
		// Retrying cannot help a request without a key.
		return taskservice.Result{}, taskservice.Permanent(errors.New("memory: no intent id"))
	}
	if err := ctx.Err(); err != nil {
		// The call did not happen; a retry may.
		return taskservice.Result{}, taskservice.Transient(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := taskservice.Result{StoreID: "memory"}
	if b, ok := s.tasks[req.IntentID]; ok {
		res.TaskID = b.taskID
		if b.digest == req.RequestDigest {
			res.Outcome = taskservice.Replayed
		} else {
			res.Outcome = taskservice.Conflict
		}
		return res, nil
	}
	s.next++
	res.Outcome, res.TaskID = taskservice.Created, fmt.Sprintf("task-%04d", s.next)
	s.tasks[req.IntentID] = binding{req.RequestDigest, res.TaskID}
	return res, nil
}

// An adapter keeps the contract: the first call creates, a resend with the
// same digest replays the first task, another digest under the same intent
// id is a conflict, and a new intent id is a new task.
func Example() {
	var svc taskservice.Service = &memoryService{tasks: map[string]binding{}}
	ctx := context.Background()
	req := taskservice.Request{
		IntentID:      "intent-0001",
		RequestDigest: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		RequestID:     "task-request-0001",
		Task:          taskservice.Task{Title: "add the missing check items"},
	}
	changed := req
	changed.RequestDigest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	changed.Task.Title = "a changed title"
	another := req
	another.IntentID = "intent-0002"

	for _, r := range []taskservice.Request{req, req, changed, another} {
		res, err := svc.Create(ctx, r)
		if err == nil {
			err = taskservice.Check(res)
		}
		if err != nil {
			fmt.Println("error:", err, "permanent:", taskservice.IsPermanent(err))
			continue
		}
		fmt.Println(r.IntentID, res.Outcome, res.TaskID)
	}

	_, err := svc.Create(ctx, taskservice.Request{})
	fmt.Println("without an intent id, permanent:", taskservice.IsPermanent(err))
	// Output:
	// intent-0001 created task-0001
	// intent-0001 replayed task-0001
	// intent-0001 idempotency_conflict task-0001
	// intent-0002 created task-0002
	// without an intent id, permanent: true
}
