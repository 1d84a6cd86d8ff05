package provider

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/tracing"
)

func (s *Service) handleCreate(r micro.Request) {
	start := time.Now()
	tr := startCreateTrace(r)
	req, refused, err := decodeCreate(r.Data())
	if err != nil {
		s.stats.record(start, err)
		tr.end(CreateResponse{}, err)
		s.refuse(r, err)
		return
	}
	tr.called(req)
	if !s.lease.held() {
		err := errLeaseUnconfirmed
		s.stats.record(start, err)
		tr.end(CreateResponse{}, err)
		s.respondError(r, CodeUnavailable, "unavailable: "+err.Error())
		return
	}
	reply := r.Reply()
	drop, wait := s.admit(refused == nil)
	var answered chan struct{}
	if wait {
		answered = make(chan struct{})
	}
	tr.committing()
	err = s.st.submit(&createCall{req: req, refused: refused, dropReply: drop, mayCommit: s.mayCommit, done: func(resp CreateResponse, err error) {
		tr.committed(err)
		// Recorded before the answer, so that a caller who reads the stats
		// after its reply finds its call counted.
		s.stats.record(start, err)
		s.answer(tr.context(), reply, req, drop, resp, err)
		tr.end(resp, err)
		if wait {
			close(answered)
			return
		}
		s.leave()
	}})
	if err != nil {
		s.unadmit(drop, wait)
		s.log.ErrorContext(tr.context(), "create call not accepted", "intent_id", req.IntentID, "err", err)
		s.stats.record(start, err)
		tr.committed(err)
		tr.end(CreateResponse{}, err)
		s.respondError(r, CodeInternal, "store unavailable: "+err.Error())
		return
	}
	if wait {
		<-answered
	}
}

// admit counts a create call in flight, unless the service is stopping
// (wait: the handler then waits for the call's answer itself), and takes
// the fault switch for it when armed and the call may create or replay
// (mayUse; a refused call is answered with its refusal).
func (s *Service) admit(mayUse bool) (drop, wait bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropPending > 0 && mayUse {
		s.dropPending--
		drop = true
	}
	wait = s.stopping
	if !wait {
		s.inflight++
	}
	return drop, wait
}

// unadmit undoes admit for a call the writer did not take.
func (s *Service) unadmit(drop, wait bool) {
	if drop {
		s.mu.Lock()
		s.dropPending++
		s.mu.Unlock()
	}
	if !wait {
		s.leave()
	}
}

// leave counts a create call admitted without wait as answered.
func (s *Service) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 {
		s.idle.Broadcast()
	}
}

// createTrace is the trace of one create call: its context, its server
// span and the child that waits for its commit. It is nil when tracing is
// off, and then its methods do nothing and the call carries one nil
// pointer for it.
type createTrace struct {
	ctx          context.Context
	span, commit trace.Span
}

// startCreateTrace starts the server span of create call r, a child of the
// caller's span when r's headers carry its trace context; nil when tracing
// is off.
func startCreateTrace(r micro.Request) *createTrace {
	if !tracing.On() {
		return nil
	}
	ctx, span := tracing.Tracer().Start(tracing.Extract(context.Background(), nats.Header(r.Headers())), "provider create", serverSpan...)
	return &createTrace{ctx: ctx, span: span}
}

// context is the call's context, holding its span, for the log's trace ids.
func (t *createTrace) context() context.Context {
	if t == nil {
		return context.Background()
	}
	return t.ctx
}

// recording reports whether the call's span records.
func (t *createTrace) recording() bool { return t != nil && t.span.IsRecording() }

// called names the call's key on its span.
func (t *createTrace) called(req CreateRequest) {
	if t.recording() {
		t.span.SetAttributes(tracing.IntentID.String(req.IntentID), tracing.Scope.String(req.Scope))
	}
}

// committing starts the child that lasts until the call's group is
// committed: its wait for the writer, its decision and the commit.
func (t *createTrace) committing() {
	if t.recording() {
		_, t.commit = tracing.Tracer().Start(t.ctx, "commit")
	}
}

// committed ends the commit span; err fails it unless it is the call's
// refusal, which was committed as such.
func (t *createTrace) committed(err error) {
	if t == nil || t.commit == nil {
		return
	}
	if _, refused := errors.AsType[*RefusedError](err); !refused {
		tracing.Fail(t.commit, err)
	}
	t.commit.End()
}

// end ends the call's span with its outcome and task id, and its error if
// any.
func (t *createTrace) end(resp CreateResponse, err error) {
	if t == nil {
		return
	}
	if t.span.IsRecording() {
		if resp.Outcome != "" {
			t.span.SetAttributes(tracing.Outcome.String(resp.Outcome))
		}
		if resp.TaskID != "" {
			t.span.SetAttributes(tracing.TaskID.String(resp.TaskID))
		}
		tracing.Fail(t.span, err)
	}
	t.span.End()
}

// errLeaseUnconfirmed refuses a create while this instance cannot confirm
// that it holds the lease; callers retry.
var errLeaseUnconfirmed = errors.New("provider: this instance cannot confirm its lease (NATS unreachable or reconnected since its last renewal); retry")

// mayCommit is asked by the store's writer just before a create call is
// written: a lease that lapsed while the call waited for its group (a slow
// commit before it) leaves the call unwritten.
func (s *Service) mayCommit() error {
	if !s.lease.held() {
		return errLeaseUnconfirmed
	}
	return nil
}

// answer replies to one create call; it runs on the writer goroutine after
// the commit. ctx holds the call's span, for the log's trace ids.
func (s *Service) answer(ctx context.Context, reply string, req CreateRequest, drop bool, resp CreateResponse, err error) {
	if err != nil {
		if drop {
			// Nothing was committed, so the switch is not used up.
			s.mu.Lock()
			s.dropPending++
			s.mu.Unlock()
		}
		if errors.Is(err, errLeaseUnconfirmed) {
			s.replyError(reply, CodeUnavailable, "unavailable: "+err.Error())
			return
		}
		if re, ok := errors.AsType[*RefusedError](err); ok {
			// A client with create rights asked for something its request
			// does not say: worth an operator's attention.
			s.log.WarnContext(ctx, "create refused: the call does not match its request", "intent_id", req.IntentID,
				"call_ref", req.CallRef, "check", re.Check, "field", re.Field, "request_seq", re.RequestSeq)
			s.replyError(reply, CodeBadRequest, re.reply())
			return
		}
		s.log.ErrorContext(ctx, "create failed", "intent_id", req.IntentID, "err", err)
		s.replyError(reply, CodeInternal, "store failure: "+err.Error())
		return
	}
	level, msg := slog.LevelDebug, "create call"
	switch {
	case drop:
		level, msg = slog.LevelWarn, "fault switch: reply withheld after commit"
	case resp.Outcome == OutcomeConflict:
		level = slog.LevelInfo
	}
	if s.log.Enabled(ctx, level) {
		s.log.Log(ctx, level, msg, "intent_id", req.IntentID, "outcome", resp.Outcome, "task_id", resp.TaskID,
			"request_seq", resp.RequestSeq, "requests_received", resp.Counts.RequestsReceived,
			"creates_executed", resp.Counts.CreatesExecuted, "tasks_existing", resp.Counts.TasksExisting)
	}
	if drop {
		return
	}
	s.publish(&nats.Msg{Subject: reply, Data: resp.appendJSON(nil)})
}

func (s *Service) handleStats(r micro.Request) {
	s.respondJSON(r, s.info())
}

// info is the stats reply: the counters, the keys' figures and the scopes'
// counters, as of one commit.
func (s *Service) info() Info {
	counts, keys, scopes := s.st.snapshot()
	return Info{Counts: counts, StoreID: s.me.StoreID, Instance: s.me.Instance, Host: s.me.Host, PID: s.me.PID,
		Keys: keys, Scopes: scopes, Lifetime: s.st.lifetime()}
}

// handleDelete deletes one task as its owner would. It goes through the
// store's writer, ordered with creates, and only while the lease is
// confirmed. An unknown task is answered "404", one already deleted "409";
// neither changes anything.
func (s *Service) handleDelete(r micro.Request) {
	req, err := decodeDelete(r.Data())
	if err != nil {
		s.refuse(r, err)
		return
	}
	if !s.lease.held() {
		s.respondError(r, CodeUnavailable, "unavailable: "+errLeaseUnconfirmed.Error())
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	resp, err := s.st.deleteIf(ctx, req, s.mayCommit)
	switch {
	case errors.Is(err, errLeaseUnconfirmed):
		s.respondError(r, CodeUnavailable, "unavailable: "+err.Error())
	case errors.Is(err, ErrUnknownTask):
		s.respondError(r, CodeNotFound, err.Error())
	case errors.Is(err, ErrTaskDeleted):
		s.respondError(r, CodeConflict, err.Error())
	case err != nil:
		s.log.Error("delete failed", "err", err)
		s.respondError(r, CodeInternal, "store failure: "+err.Error())
	default:
		d := resp.Deleted
		s.log.Info("task deleted by its owner; its key stays", "scope", d.Scope, "intent_id", d.IntentID, "task_id", d.TaskID,
			"delete_seq", d.Seq, "tasks_existing", resp.Counts.TasksExisting)
		s.respondJSON(r, resp)
	}
}

func (s *Service) handleRecords(r micro.Request) {
	req, err := decodeRecords(r.Data())
	if err != nil {
		s.refuse(r, err)
		return
	}
	resp, err := s.st.Records(req)
	if err != nil {
		if errors.Is(err, ErrInvalidRequest) {
			s.refuse(r, err)
			return
		}
		s.log.Error("records failed", "kind", req.Kind, "err", err)
		s.respondError(r, CodeInternal, err.Error())
		return
	}
	s.respondJSON(r, resp)
}

func (s *Service) handleFault(r micro.Request) {
	req, err := decodeFault(r.Data())
	if err != nil {
		s.refuse(r, err)
		return
	}
	if req.DropReplies < 0 {
		s.refuse(r, fieldErr("drop_replies", "negative"))
		return
	}
	s.DropReplies(req.DropReplies)
	s.respondJSON(r, FaultResponse{DropRepliesPending: s.pendingDrops()})
}

// refuse answers a malformed call with "400" and the field at fault.
func (s *Service) refuse(r micro.Request, err error) {
	reason := err.Error()
	var fe *FieldError
	if errors.As(err, &fe) {
		reason = fe.reply()
	}
	s.log.Debug("call refused", "subject", r.Subject(), "reason", reason)
	s.respondError(r, CodeBadRequest, "invalid request: "+reason)
}

func (s *Service) respondJSON(r micro.Request, v any) {
	if err := r.RespondJSON(v); err != nil {
		s.log.Error("reply failed", "subject", r.Subject(), "err", err)
	}
}

func (s *Service) respondError(r micro.Request, code, desc string) {
	if err := r.Error(code, headerSafe(desc), nil); err != nil {
		s.log.Error("error reply failed", "subject", r.Subject(), "err", err)
	}
}

// replyError sends a micro-style error reply from outside the handler.
func (s *Service) replyError(reply, code, desc string) {
	s.publish(&nats.Msg{Subject: reply, Header: nats.Header{
		micro.ErrorHeader:     []string{headerSafe(desc)},
		micro.ErrorCodeHeader: []string{code},
	}})
}

func (s *Service) publish(m *nats.Msg) {
	if m.Subject == "" {
		return // the caller asked for no reply
	}
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Error("reply failed", "subject", m.Subject, "err", err)
	}
}

// CreateStats are the create endpoint's figures as its callers see them:
// from the arrival of a call to its answer, which comes after the commit of
// the group the call is in, and every error answer, store failures included.
// They are the create endpoint's "data" in the micro STATS reply, beside
// micro's own figures, which time only the handler: it hands the call to the
// writer and returns before the commit, so that calls arriving together are
// committed together.
type CreateStats struct {
	NumRequests           int64         `json:"num_requests"`
	NumErrors             int64         `json:"num_errors"`
	LastError             string        `json:"last_error"`
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

type createStats struct {
	mu sync.Mutex
	CreateStats
}

func (c *createStats) record(start time.Time, err error) {
	d := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.NumRequests++
	c.ProcessingTime += d
	c.AverageProcessingTime = c.ProcessingTime / time.Duration(c.NumRequests)
	if err != nil {
		c.NumErrors++
		c.LastError = err.Error()
	}
}

func (c *createStats) snapshot() CreateStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.CreateStats
}

// endpointStats is the micro StatsHandler: the create endpoint's data.
func (s *Service) endpointStats(e *micro.Endpoint) any {
	if e.Name != "create" {
		return nil
	}
	return s.stats.snapshot()
}

// headerSafe keeps a description on one header line.
func headerSafe(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '\r' || r == '\n' {
			out[i] = ' '
		}
	}
	return string(out)
}
