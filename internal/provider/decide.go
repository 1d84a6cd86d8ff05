package provider

import (
	"context"
	"fmt"
	"time"
)

// createCall is a create call waiting for the writer.
type createCall struct {
	req       CreateRequest
	dropReply bool // recorded as reply_dropped on the request record
	// refused, when set, is why the call does not match its request: it is
	// recorded as a refused request, creates nothing, and is answered with
	// a *RefusedError. decide sets it for a new key whose deadline passed.
	refused *Refusal
	// done is called exactly once by the writer, after the commit (or its
	// failure), with this call's result.
	done func(CreateResponse, error)
	// mayCommit, when set, is asked by the writer just before the call is
	// decided and written (see permit).
	mayCommit func() error
	resp      CreateResponse // decided by apply
}

// apply decides the call against its key as the group has it.
func (c *createCall) apply(s *Store, g *groupState) error {
	if err := permit(c.mayCommit); err != nil {
		return err
	}
	if c.refused != nil {
		c.resp = s.decide(g, c, FirstResult{}, false)
		return nil
	}
	first, found, err := s.lookupIntent(g, c.req.Scope, c.req.IntentID)
	if err != nil {
		return err
	}
	c.resp = s.decide(g, c, first, found)
	return nil
}

// answer gives the call its result; a refused call gets a *RefusedError
// beside its response.
func (c *createCall) answer(err error) {
	switch {
	case err != nil:
		c.done(CreateResponse{}, err)
	case c.refused != nil:
		c.done(c.resp, &RefusedError{Refusal: *c.refused, RequestSeq: c.resp.RequestSeq})
	default:
		c.done(c.resp, nil)
	}
}

// Create validates req, checks it against its request document, and decides
// it: created, replayed or idempotency_conflict. A call that does not match
// its request is recorded as refused and answered with a *RefusedError
// (errors.Is(err, ErrRefused)); an invalid one is refused unrecorded
// (ErrInvalidRequest). It returns once the call's effect is committed. If
// ctx ends first, Create returns ctx's error, but a call already handed to
// the writer may still be committed, exactly like a reply lost on the way.
func (s *Store) Create(ctx context.Context, req CreateRequest) (CreateResponse, error) {
	req, refused, err := checkCreate(req)
	if err != nil {
		return CreateResponse{}, err
	}
	type result struct {
		resp CreateResponse
		err  error
	}
	ch := make(chan result, 1)
	err = s.submit(&createCall{req: req, refused: refused, done: func(resp CreateResponse, err error) {
		ch <- result{resp, err}
	}})
	if err != nil {
		return CreateResponse{}, err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return CreateResponse{}, fmt.Errorf("create %q: %w", req.IntentID, ctx.Err())
	}
}

// keepUntil is when a key may be compacted for an approval that expires at
// notAfter (zero = never: the key is kept forever, "").
func (s *Store) keepUntil(notAfter time.Time) time.Time {
	if notAfter.IsZero() {
		return time.Time{}
	}
	return notAfter.Add(s.allowance + s.margin)
}

// setIntent writes a key's intent record and keeps its expiry entry in
// step: the old one (at oldKeep) removed, the new one (at fr.KeepUntil)
// added. Zero times have no entry.
func (g *groupState) setIntent(fr FirstResult, oldKeep time.Time) {
	newKeep, _ := parseKeep(fr.KeepUntil)
	if !oldKeep.IsZero() && !oldKeep.Equal(newKeep) {
		g.w.del(expiryKey(oldKeep, fr.Scope, fr.IntentID))
	}
	if !newKeep.IsZero() && !oldKeep.Equal(newKeep) {
		g.w.put(expiryKey(newKeep, fr.Scope, fr.IntentID), nil)
	}
	putRecord(&g.w, intentKey(fr.Scope, fr.IntentID), fr)
	if g.intents != nil {
		g.intents.add(fr.Scope, fr.IntentID)
	}
	cp := fr
	g.decided[keyName(fr.Scope, fr.IntentID)] = &cp
}

// decide applies one create call to the group and returns its response.
// Every call is a request received and gets its request record; then it
// creates a task (a new key), is refused (its request does not back it, or
// a new key's deadline has passed) or is answered with its key's first
// result (replayed or idempotency_conflict).
func (s *Store) decide(g *groupState, c *createCall, first FirstResult, found bool) CreateResponse {
	req := c.req
	m := &g.m
	sc := g.scope(req.Scope)
	nowT := s.clock().UTC()
	now := nowT.Format(time.RFC3339Nano)
	m.RequestsReceived++
	sc.RequestsReceived++
	seq := uint64(m.RequestsReceived)
	rec := RequestRecord{
		Seq:           seq,
		Scope:         req.Scope,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		RequestID:     req.RequestID,
		CallRef:       req.CallRef,
		NotAfter:      req.NotAfter,
		ReceivedAt:    now,
		ReplyDropped:  c.dropReply,
	}
	var notAfter time.Time
	if req.NotAfter != "" {
		notAfter, _ = time.Parse(time.RFC3339, req.NotAfter) // validated by checkCreate
	}
	keep := s.keepUntil(notAfter)
	if !found && c.refused == nil && !s.unsafe && !keep.IsZero() && nowT.After(keep) {
		c.refused = lateKeyRefusal(req.NotAfter, keep, nowT)
	}
	var resp CreateResponse
	switch {
	case c.refused != nil:
		// Recorded as received, so that the attempt stays on the record;
		// nothing is created and no intent record is touched.
		refusal := *c.refused
		rec.Outcome, rec.Refusal = OutcomeRefused, &refusal
		resp = CreateResponse{Outcome: OutcomeRefused}
	case !found || s.unsafe:
		// The first create of a key writes no index entry for its
		// request, create and task: its intent record stands for them.
		fr := g.createTask(sc, req, seq, now, keep, found)
		if !found {
			// The first result is written once; later calls only extend
			// its keep_until and mark its task deleted.
			g.setIntent(fr, time.Time{})
			g.w.put(seqKey(prefixIntentOrder, seq), []byte(keyName(req.Scope, req.IntentID)))
			m.KeysLive++
			sc.KeysLive++
		} else {
			s.extend(g, first, keep, notAfter.IsZero())
		}
		rec.Outcome, rec.TaskID = OutcomeCreated, fr.TaskID
		resp = CreateResponse{Outcome: OutcomeCreated, TaskID: fr.TaskID, First: fr}
	default:
		first = s.extend(g, first, keep, notAfter.IsZero())
		rec.Outcome, rec.TaskID = OutcomeConflict, first.TaskID
		if first.RequestDigest == req.RequestDigest {
			rec.Outcome = OutcomeReplayed
		}
		rec.TaskDeleted = first.TaskDeleted
		resp = CreateResponse{Outcome: rec.Outcome, TaskID: first.TaskID, First: first, TaskDeleted: first.TaskDeleted}
	}
	putRecord(&g.w, seqKey(prefixRequest, seq), rec)
	if found || rec.Outcome != OutcomeCreated {
		g.w.put(indexKey(req.Scope, req.IntentID, prefixRequest, seq), nil)
	}
	resp.Counts = m.counts()
	resp.RequestSeq = seq
	resp.StoreID = m.StoreID
	return resp
}

// lateKeyRefusal refuses a new key whose own deadline (keep) has passed by
// the service's clock: it would be compacted at once, and no approval can
// pass the gate any more, so the call is refused, recorded, and creates
// nothing (a caller whose clock runs behind by more than the allowance, or
// a call delayed beyond the margin).
func lateKeyRefusal(notAfter string, keep, now time.Time) *Refusal {
	return &Refusal{Check: CheckKeyDeadline, Field: "not_after",
		Reason: fmt.Sprintf("the key's deadline passed: not_after %s plus the allowance and margin is %s, before the service's clock (%s); the approval cannot pass the gate any more",
			notAfter, keep.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
}

// createTask creates the task of request number seq: the counters move,
// and its create and task records are written, with their index entries
// when indexed (a later create of a known key, in the unsafe mode). It
// returns the key's first result as this create makes it.
func (g *groupState) createTask(sc *ScopeCounts, req CreateRequest, seq uint64, now string, keep time.Time, indexed bool) FirstResult {
	m := &g.m
	m.CreatesExecuted++
	m.TasksExisting++
	m.LastTaskNumber++
	sc.CreatesExecuted++
	sc.TasksExisting++
	// Both count creates, so a create's sequence is its task's number,
	// which the per-key index relies on (impliedEntry).
	createSeq := uint64(m.CreatesExecuted)
	taskSeq := m.LastTaskNumber
	taskID := FormatTaskID(taskSeq)
	fr := FirstResult{
		Scope:         req.Scope,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		RequestID:     req.RequestID,
		TaskID:        taskID,
		CreatedAt:     now,
		RequestSeq:    seq,
		KeepUntil:     formatKeep(keep),
	}
	putRecord(&g.w, seqKey(prefixCreate, createSeq), CreateRecord{
		Seq:           createSeq,
		Scope:         req.Scope,
		IntentID:      req.IntentID,
		RequestDigest: req.RequestDigest,
		TaskID:        taskID,
		RequestSeq:    seq,
		CreatedAt:     now,
	})
	tr := TaskRecord{
		Seq:       taskSeq,
		TaskID:    taskID,
		Scope:     req.Scope,
		IntentID:  req.IntentID,
		Task:      req.Task,
		CreatedAt: now,
	}
	putRecord(&g.w, seqKey(prefixTask, taskSeq), tr)
	g.tasks[taskSeq] = &tr
	if indexed {
		g.w.put(indexKey(req.Scope, req.IntentID, prefixCreate, createSeq), nil)
		g.w.put(indexKey(req.Scope, req.IntentID, prefixTask, taskSeq), nil)
	}
	return fr
}

// extend makes a key's keep_until the later of its own and keep (forever
// when the approval never expires, or the key is already kept forever),
// and returns the key's record as it is now.
func (s *Store) extend(g *groupState, first FirstResult, keep time.Time, forever bool) FirstResult {
	old, err := parseKeep(first.KeepUntil)
	if err != nil || old.IsZero() {
		return first // kept forever already (or unreadable: kept)
	}
	switch {
	case forever:
		first.KeepUntil = ""
	case keep.After(old):
		first.KeepUntil = formatKeep(keep)
	default:
		return first
	}
	g.setIntent(first, old)
	return first
}
