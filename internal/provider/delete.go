package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// deleteCall is a delete waiting for the writer.
type deleteCall struct {
	req       DeleteRequest
	mayCommit func() error // asked just before the delete is decided (see permit)
	done      func(DeleteResponse, error)
	resp      DeleteResponse // decided by apply
}

func (c *deleteCall) apply(s *Store, g *groupState) error {
	if err := permit(c.mayCommit); err != nil {
		return err
	}
	var err error
	c.resp, err = s.applyDelete(g, c.req)
	return err
}

func (c *deleteCall) answer(err error) { c.done(c.resp, err) }

// Errors of a delete.
var (
	// ErrUnknownTask means that no task exists under the key or task id
	// given (never created, or its key was compacted).
	ErrUnknownTask = errors.New("provider: no such task")
	// ErrTaskDeleted means that the task was already deleted.
	ErrTaskDeleted = errors.New("provider: task already deleted")
)

// Delete deletes one task the way its owner deletes it in their list:
// tasks existing goes down by one (in total and in its scope), a delete
// record is kept, the task record is removed, and the key stays, marked
// deleted, so that a resend of its approval is replayed and creates
// nothing. An unknown task is ErrUnknownTask, one already deleted
// ErrTaskDeleted; either changes nothing. It goes through the writer, so it
// is ordered with creates.
func (s *Store) Delete(ctx context.Context, req DeleteRequest) (DeleteResponse, error) {
	return s.deleteIf(ctx, req, nil)
}

// deleteIf is Delete, asking mayCommit (when set) just before the writer
// decides it, as for a create.
func (s *Store) deleteIf(ctx context.Context, req DeleteRequest, mayCommit func() error) (DeleteResponse, error) {
	req, err := checkDelete(req)
	if err != nil {
		return DeleteResponse{}, err
	}
	type result struct {
		resp DeleteResponse
		err  error
	}
	ch := make(chan result, 1)
	if err := s.submit(&deleteCall{req: req, mayCommit: mayCommit, done: func(resp DeleteResponse, err error) { ch <- result{resp, err} }}); err != nil {
		return DeleteResponse{}, err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return DeleteResponse{}, fmt.Errorf("delete: %w", ctx.Err())
	}
}

// applyDelete deletes one task (see Delete).
func (s *Store) applyDelete(g *groupState, req DeleteRequest) (DeleteResponse, error) {
	var n uint64
	if req.TaskID != "" {
		n, _ = parseTaskID(req.TaskID) // validated by checkDelete
	} else {
		fr, found, err := s.lookupIntent(g, req.Scope, req.IntentID)
		if err != nil {
			return DeleteResponse{}, err
		}
		if !found {
			return DeleteResponse{}, fmt.Errorf("%w: no key (scope %q, intent %q): never created, or compacted after its approvals expired", ErrUnknownTask, req.Scope, req.IntentID)
		}
		if fr.TaskDeleted {
			return DeleteResponse{}, fmt.Errorf("%w: %s (scope %q, intent %q) was deleted at %s", ErrTaskDeleted, fr.TaskID, req.Scope, req.IntentID, fr.DeletedAt)
		}
		n, _ = parseTaskID(fr.TaskID)
	}
	tr, found, err := s.lookupTask(g, n)
	if err != nil {
		return DeleteResponse{}, err
	}
	if !found {
		if n >= 1 && n <= g.m.LastTaskNumber {
			return DeleteResponse{}, fmt.Errorf("%w: %s no longer exists", ErrTaskDeleted, FormatTaskID(n))
		}
		return DeleteResponse{}, fmt.Errorf("%w: %s was never created", ErrUnknownTask, FormatTaskID(n))
	}
	now := s.clock().UTC().Format(time.RFC3339Nano)
	m := &g.m
	sc := g.scope(tr.Scope)
	m.TasksExisting--
	sc.TasksExisting--
	m.DeletesExecuted++
	sc.TasksDeleted++
	seq := uint64(m.DeletesExecuted)
	rec := DeleteRecord{Seq: seq, Scope: tr.Scope, IntentID: tr.IntentID, TaskID: tr.TaskID, DeletedAt: now}
	g.w.del(seqKey(prefixTask, n))
	g.w.del(indexKey(tr.Scope, tr.IntentID, prefixTask, n))
	g.tasks[n] = nil
	g.w.putJSON(seqKey(prefixDelete, seq), rec)
	g.w.put(indexKey(tr.Scope, tr.IntentID, prefixDelete, seq), nil)
	fr, found, err := s.lookupIntent(g, tr.Scope, tr.IntentID)
	if err != nil {
		return DeleteResponse{}, err
	}
	if found && fr.TaskID == tr.TaskID {
		old, _ := parseKeep(fr.KeepUntil)
		fr.TaskDeleted, fr.DeletedAt = true, now
		g.setIntent(fr, old)
	}
	return DeleteResponse{Deleted: rec, Counts: m.counts()}, nil
}

// compactChunk removes up to one chunk of expired keys and one chunk of
