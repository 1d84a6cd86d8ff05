package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// DefaultVersion is the micro service version when ServiceConfig.Version is empty.
const DefaultVersion = "0.1.0"

// Error codes of the service's error replies.
const (
	CodeBadRequest = "400"
	CodeInternal   = "500"
)

// ServiceConfig configures Serve.
type ServiceConfig struct {
	AllowFaults bool         // registers the `fault` endpoint; logged loudly (WARN) when on
	Logger      *slog.Logger // nil = slog.Default()
	Version     string       // micro requires semver; default "0.1.0"
}

// Service is the NATS face of a Store.
//
// Create calls do not block the subscription: the handler validates the call
// and hands it to the store's writer, which answers it after the commit. So
// calls arriving together are committed together.
type Service struct {
	nc  *nats.Conn
	st  *Store
	svc micro.Service
	log *slog.Logger

	mu          sync.Mutex
	idle        *sync.Cond // signalled when inflight drops to 0
	inflight    int        // create calls handed to the writer and not yet answered
	stopping    bool       // once set, create handlers wait for their own answer
	dropPending int        // replies still to withhold
}

// Serve registers the fake-task-provider micro service on nc, backed by st.
func Serve(nc *nats.Conn, st *Store, cfg ServiceConfig) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	s := &Service{nc: nc, st: st, log: cfg.Logger.With("component", "provider-service")}
	s.idle = sync.NewCond(&s.mu)

	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "Fake task service: creates tasks idempotently by intent id and counts requests, creates and tasks.",
		Metadata:    map[string]string{"faults_allowed": fmt.Sprint(cfg.AllowFaults)},
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Error("service subscription error", "subject", e.Subject, "err", e.Description)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("add micro service: %w", err)
	}
	s.svc = svc
	type endpoint struct {
		name, subject string
		h             micro.HandlerFunc
	}
	endpoints := []endpoint{
		{"create", SubjectCreate, s.handleCreate},
		{"stats", SubjectStats, s.handleStats},
		{"records", SubjectRecords, s.handleRecords},
	}
	if cfg.AllowFaults {
		endpoints = append(endpoints, endpoint{"fault", SubjectFault, s.handleFault})
	}
	for _, e := range endpoints {
		if err := svc.AddEndpoint(e.name, e.h, micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("add endpoint %s: %w", e.name, err)
		}
	}
	// Make sure the server knows the subscriptions before callers are told
	// the service is up.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("flush subscriptions: %w", err)
	}
	if cfg.AllowFaults {
		s.log.Warn("FAULTS ALLOWED: the fault endpoint can withhold create replies; never use this outside tests and demos",
			"subject", SubjectFault)
	}
	s.log.Info("service started", "name", ServiceName, "version", cfg.Version, "id", svc.Info().ID,
		"create", SubjectCreate, "stats", SubjectStats, "records", SubjectRecords)
	return s, nil
}

// DropReplies arms the fault switch: the replies of the next n create calls
// are withheld after their effect is committed, and their request records
// say reply_dropped. n = 0 disarms it.
func (s *Service) DropReplies(n int) {
	if n < 0 {
		n = 0
	}
	s.mu.Lock()
	s.dropPending = n
	s.mu.Unlock()
	if n == 0 {
		s.log.Warn("fault switch disarmed")
		return
	}
	s.log.Warn("fault switch armed: create replies will be withheld after commit", "drop_replies", n)
}

func (s *Service) pendingDrops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropPending
}

// Stop stops the micro service. Create calls already handed to the store are
// answered before Stop returns; calls still queued in the subscription are
// answered by the handler itself while the subscription drains, so draining
// the connection afterwards delivers every reply. Close the store only after
// the connection has drained.
func (s *Service) Stop() error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	s.mu.Unlock()
	err := s.svc.Stop()
	s.mu.Lock()
	for s.inflight > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stop micro service: %w", err)
	}
	s.log.Info("service stopped")
	return nil
}

func (s *Service) handleCreate(r micro.Request) {
	req, err := decodeCreate(r.Data())
	if err != nil {
		s.refuse(r, err)
		return
	}
	reply := r.Reply()

	s.mu.Lock()
	drop := false
	if s.dropPending > 0 {
		s.dropPending--
		drop = true
	}
	wait := s.stopping
	if !wait {
		s.inflight++
	}
	s.mu.Unlock()

	var answered chan struct{}
	if wait {
		answered = make(chan struct{})
	}
	err = s.st.submit(req, drop, func(resp CreateResponse, err error) {
		s.answer(reply, req, drop, resp, err)
		if wait {
			close(answered)
			return
		}
		s.mu.Lock()
		s.inflight--
		if s.inflight == 0 {
			s.idle.Broadcast()
		}
		s.mu.Unlock()
	})
	if err != nil {
		s.mu.Lock()
		if !wait {
			s.inflight--
			if s.inflight == 0 {
				s.idle.Broadcast()
			}
		}
		if drop {
			s.dropPending++
		}
		s.mu.Unlock()
		s.log.Error("create call not accepted", "intent_id", req.IntentID, "err", err)
		s.replyError(reply, CodeInternal, "store unavailable: "+err.Error())
		return
	}
	if wait {
		<-answered
	}
}

// answer replies to one create call; it runs on the writer goroutine after
// the commit.
func (s *Service) answer(reply string, req CreateRequest, drop bool, resp CreateResponse, err error) {
	if err != nil {
		if drop {
			// Nothing was committed, so the switch is not used up.
			s.mu.Lock()
			s.dropPending++
			s.mu.Unlock()
		}
		s.log.Error("create failed", "intent_id", req.IntentID, "err", err)
		s.replyError(reply, CodeInternal, "store failure: "+err.Error())
		return
	}
	attrs := []any{"intent_id", req.IntentID, "outcome", resp.Outcome, "task_id", resp.TaskID,
		"request_seq", resp.RequestSeq, "requests_received", resp.Counts.RequestsReceived,
		"creates_executed", resp.Counts.CreatesExecuted, "tasks_existing", resp.Counts.TasksExisting}
	if drop {
		s.log.Warn("fault switch: reply withheld after commit", attrs...)
		return
	}
	if resp.Outcome == OutcomeConflict {
		s.log.Info("create call", attrs...)
	} else {
		s.log.Debug("create call", attrs...)
	}
	data, err := json.Marshal(resp)
	if err != nil {
		s.replyError(reply, CodeInternal, "encode reply: "+err.Error())
		return
	}
	s.publish(&nats.Msg{Subject: reply, Data: data})
}

func (s *Service) handleStats(r micro.Request) {
	s.respondJSON(r, s.st.Stats())
}

func (s *Service) handleRecords(r micro.Request) {
	var req RecordsRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
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
	var req FaultRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
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
