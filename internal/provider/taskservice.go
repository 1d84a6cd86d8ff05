package provider

import (
	"context"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// TaskService returns the fake task service behind c as a
// taskservice.Service, the contract the executor calls. Failures that
// IsTransient calls transient are marked taskservice.Transient; the rest
// (the service refused the call as wrong) taskservice.Permanent.
func (c *Client) TaskService() taskservice.Service { return contract{c} }

type contract struct{ c *Client }

func (s contract) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	var notAfter string
	if !req.NotAfter.IsZero() {
		notAfter = req.NotAfter.UTC().Format(time.RFC3339Nano)
	}
	resp, err := s.c.Create(ctx, CreateRequest{
		Scope:         req.Scope,
		NotAfter:      notAfter,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		RequestID:     req.RequestID,
		Task:          Task{Title: req.Task.Title, AssigneePersonRef: req.Task.AssigneePersonRef, DueAt: req.Task.DueAt},
		CallRef:       req.CallRef,
		Request:       req.Request,
	})
	if err != nil {
		if IsTransient(err) {
			return taskservice.Result{}, taskservice.Transient(err)
		}
		return taskservice.Result{}, taskservice.Permanent(err)
	}
	return taskservice.Result{
		Outcome:     taskservice.Outcome(resp.Outcome),
		TaskID:      resp.TaskID,
		StoreID:     resp.StoreID,
		TaskDeleted: resp.TaskDeleted,
		Counts:      &resp.Counts,
	}, nil
}
