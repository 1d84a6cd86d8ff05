package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// DefaultVersion is the micro service version when ServiceConfig.Version is empty.
const DefaultVersion = "0.1.0"

// Error codes of the service's error replies.
const (
	CodeBadRequest = "400"
	// CodeNotFound answers a delete of a task that does not exist.
	CodeNotFound = "404"
	// CodeConflict answers a delete of a task already deleted.
	CodeConflict = "409"
	CodeInternal = "500"
	// CodeUnavailable answers a create while this instance cannot confirm
	// its lease; a retry reaches it (or another instance) later.
	CodeUnavailable = "503"
)

// ServiceConfig configures Serve.
type ServiceConfig struct {
	AllowFaults bool         // registers the `fault` endpoint; logged loudly (WARN) when on
	Logger      *slog.Logger // nil = slog.Default()
	Version     string       // micro requires semver; default "0.1.0"
	// LeaseTTL is how long the lease lives without renewal, used when Serve
	// creates the lease bucket (an existing bucket keeps its own TTL); 0 =
	// DefaultLeaseTTL. It is how long another store waits after an
	// instance dies without stopping.
	LeaseTTL time.Duration
	// LeaseReplicas is the replica count of the lease bucket and of the
	// adoption bucket (AdoptionBucket) when Serve creates them; 0 = 1. Use
	// 3 on a cluster.
	LeaseReplicas int
	// DataDir is the store's data directory, recorded in the adoption
	// record when this start adopts the store (Host sets it).
	DataDir string
	// Replaces names the adopted store that this store replaces at this
	// start: the operator's act of Adopt, for processes that host the
	// service themselves (internal/embedded). Empty for every ordinary
	// start; a start of the adopted store ignores it.
	Replaces string
	// ReplaceReason says why this start adopts its store, when that is
	// meant (the demo replaces its store on purpose, to show a service
	// that has forgotten): the adoption is then logged at INFO with the
	// reason, instead of the warnings meant for an operator.
	ReplaceReason string
	// StartTimeout bounds how long Serve waits for NATS and JetStream to
	// take the lease; 0 = DefaultStartTimeout.
	StartTimeout time.Duration
}

// Service is the NATS face of a Store.
//
// Create calls do not block the subscription: the handler validates the call
// and hands it to the store's writer, which answers it after the commit. So
// calls arriving together are committed together.
type Service struct {
	nc    *nats.Conn
	st    *Store
	svc   micro.Service
	log   *slog.Logger
	me    LeaseHolder
	lease *lease
	adopt *adopter
	stats createStats

	stopRenew context.CancelFunc
	renewDone chan struct{}
	haltOnce  sync.Once
	haltErr   error
	stopOnce  sync.Once
	stopErr   error
	done      chan struct{} // closed when the service stops serving
	doneOnce  sync.Once
	err       error // why it stopped on its own; set before done closes

	mu          sync.Mutex
	idle        *sync.Cond // signalled when inflight drops to 0
	inflight    int        // create calls handed to the writer and not yet answered
	stopping    bool       // once set, create handlers wait for their own answer
	dropPending int        // replies still to withhold
	lost        bool       // the lease is held by another instance
}

// Serve registers the fake-task-provider micro service on nc, backed by st.
//
// Exactly one store serves a deployment, for the life of the deployment,
// and one instance of it at a time. Before it joins, Serve pings the
// service's instances (micro PING), reads the adoption record (see
// AdoptionBucket) and takes the lease (see LeaseBucket). If another
// instance answers, or an instance of another store holds the lease, it
// refuses to start with an *InstanceError that names it
// (errors.Is(err, ErrAnotherInstance)); if the deployment adopted another
// store, with an *AdoptionError that names it (errors.Is(err,
// ErrNotAdopted)), whether or not that store's instance is alive. On a
// deployment without a record, the first start adopts its store (once it
// holds the lease). An instance of the same store takes the lease over at
// once, so a restart after a crash serves immediately. While serving, it
// renews the lease and checks the record; a create is answered only while
// the lease is confirmed (503 otherwise, which callers retry), and if
// another instance has taken the lease, or the deployment adopted another
// store, the service stops serving and closes Done.
func Serve(nc *nats.Conn, st *Store, cfg ServiceConfig) (*Service, error) {
	cfg = cfg.withDefaults()
	host, _ := os.Hostname()
	s := &Service{nc: nc, st: st, log: cfg.Logger.With("component", "provider-service", "store_id", st.ID()),
		done: make(chan struct{}), renewDone: make(chan struct{}),
		me: LeaseHolder{StoreID: st.ID(), Host: host, PID: os.Getpid(), Since: time.Now().UTC().Format(time.RFC3339)}}
	s.idle = sync.NewCond(&s.mu)

	pings, err := pingOthers(nc)
	if err != nil {
		return nil, err
	}
	if err := refuseIfAnswered(pings, s.me.StoreID); err != nil {
		s.log.Error("not starting: another instance answers", "err", err)
		return nil, err
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), cfg.StartTimeout)
	defer cancelStart()
	if err := s.join(startCtx, cfg); err != nil {
		return nil, err
	}
	if err := s.addEndpoints(cfg.AllowFaults); err != nil {
		_ = s.svc.Stop()
		return nil, errors.Join(err, s.lease.release())
	}
	// Make sure the server knows the subscriptions before callers are told
	// the service is up.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		_ = s.svc.Stop()
		return nil, errors.Join(fmt.Errorf("flush subscriptions: %w", err), s.lease.release())
	}
	renewCtx, stopRenew := context.WithCancel(context.Background())
	s.stopRenew = stopRenew
	go func() {
		defer close(s.renewDone)
		s.lease.run(renewCtx, s.leaseLost)
	}()
	if cfg.AllowFaults {
		s.log.Warn("FAULTS ALLOWED: the fault endpoint can withhold create replies; never use this outside tests and demos",
			"subject", SubjectFault)
	}
	s.log.Info("service started", "name", ServiceName, "version", cfg.Version, "id", s.svc.Info().ID,
		"create", SubjectCreate, "stats", SubjectStats, "records", SubjectRecords, "delete", SubjectDelete,
		"lease_bucket", LeaseBucket, "lease_ttl", s.lease.ttl, "adopted", s.adopt.cur.String())
	return s, nil
}

// withDefaults fills in the defaults of the fields left zero.
func (cfg ServiceConfig) withDefaults() ServiceConfig {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	return cfg
}

// join checks the adoption record, registers the micro service (without
// endpoints yet), takes the lease and, on a deployment without a record,
// adopts the store. When it fails, the micro service is stopped and the
// lease released.
func (s *Service) join(ctx context.Context, cfg ServiceConfig) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return err
	}
	s.adopt = &adopter{nc: s.nc, js: js, replicas: cfg.LeaseReplicas, storeID: s.me.StoreID, path: cfg.DataDir,
		replaces: cfg.Replaces, reason: cfg.ReplaceReason, log: s.log}
	if err := s.adopt.check(ctx); err != nil {
		s.logNotAdopted(err)
		return err
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "Fake task service: creates tasks idempotently by intent id and counts requests, creates and tasks.",
		Metadata: map[string]string{"faults_allowed": fmt.Sprint(cfg.AllowFaults),
			"store_id": s.me.StoreID, "host": s.me.Host, "pid": strconv.Itoa(s.me.PID), "since": s.me.Since},
		StatsHandler: s.endpointStats,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Error("service subscription error", "subject", e.Subject, "err", e.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("add micro service: %w", err)
	}
	s.svc = svc
	s.me.Instance = svc.Info().ID
	s.lease, err = takeLease(ctx, s.nc, s.me, cfg, s.log)
	if err != nil {
		_ = svc.Stop()
		var ie *InstanceError
		if errors.As(err, &ie) {
			s.log.Error("not starting: another instance holds the lease", "err", err)
		}
		return err
	}
	// The first start adopts its store only now, holding the lease: a
	// store refused by the lease must not become the adopted one.
	if err := s.adopt.record(ctx); err != nil {
		_ = svc.Stop()
		s.logNotAdopted(err)
		return errors.Join(err, s.lease.release())
	}
	s.lease.adopt = s.adopt
	return nil
}

// logNotAdopted logs a refusal because the deployment adopted another store.
func (s *Service) logNotAdopted(err error) {
	if errors.Is(err, ErrNotAdopted) || errors.Is(err, ErrAdoptRefused) {
		s.log.Error("not starting: the deployment adopted another store", "err", err)
	}
}

// addEndpoints adds the service's endpoints, with the fault endpoint when
// faults are allowed.
func (s *Service) addEndpoints(allowFaults bool) error {
	type endpoint struct {
		name, subject string
		h             micro.HandlerFunc
	}
	endpoints := []endpoint{
		{"create", SubjectCreate, s.handleCreate},
		{"stats", SubjectStats, s.handleStats},
		{"records", SubjectRecords, s.handleRecords},
		{"delete", SubjectDelete, s.handleDelete},
	}
	if allowFaults {
		endpoints = append(endpoints, endpoint{"fault", SubjectFault, s.handleFault})
	}
	for _, e := range endpoints {
		if err := s.svc.AddEndpoint(e.name, e.h, micro.WithEndpointSubject(e.subject)); err != nil {
			return fmt.Errorf("add endpoint %s: %w", e.name, err)
		}
	}
	return nil
}

// StoreID is the id of the store this service serves.
func (s *Service) StoreID() string { return s.me.StoreID }

// Instance is this service instance's micro id.
func (s *Service) Instance() string { return s.me.Instance }

// Done is closed when the service stops serving: after Stop, or on its own
// when another instance has taken its lease or the deployment adopted
// another store. Err then says why.
func (s *Service) Done() <-chan struct{} { return s.done }

// Err is nil while the service serves and after Stop; after the service
// stopped on its own it wraps ErrLeaseLost and names the new holder, or
// wraps ErrStoreReplaced and names the store now adopted.
func (s *Service) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// leaseLost stops serving because another instance holds the lease, or the
// deployment adopted another store. It runs on the renewal goroutine.
func (s *Service) leaseLost(err error) {
	replaced := errors.Is(err, ErrStoreReplaced)
	s.mu.Lock()
	s.lost = !replaced
	s.mu.Unlock()
	if replaced {
		s.log.Error("STORE REPLACED: the deployment adopted another store; this instance stops answering at once", "err", err)
	} else {
		s.log.Error("LEASE LOST: another instance serves this deployment; this instance stops answering at once", "err", err)
	}
	if herr := s.halt(); herr != nil {
		s.log.Error("stopping after the lease was lost", "err", herr)
	}
	if replaced {
		// Still held: let the adopted store's instance start at once.
		if rerr := s.lease.release(); rerr != nil {
			s.log.Warn("lease not released; the adopted store's instance can start when it expires", "err", rerr, "ttl", s.lease.ttl)
		}
		s.mu.Lock()
		s.lost = true
		s.mu.Unlock()
	}
	s.finish(err)
}

func (s *Service) finish(err error) {
	s.doneOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// halt stops taking calls and waits for the calls already taken.
func (s *Service) halt() error {
	s.haltOnce.Do(func() {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		err := s.svc.Stop()
		// Let the server know that the subscriptions are gone.
		_ = s.nc.FlushTimeout(2 * time.Second)
		s.mu.Lock()
		for s.inflight > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		if err != nil {
			s.haltErr = fmt.Errorf("stop micro service: %w", err)
		}
	})
	return s.haltErr
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
// the connection afterwards delivers every reply. Then it releases the lease
// (unless another instance holds it), so that another store's instance may
// start at once. Close the store only after the connection has drained.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		s.stopRenew()
		<-s.renewDone
		err := s.halt()
		s.mu.Lock()
		lost := s.lost
		s.mu.Unlock()
		if !lost {
			if rerr := s.lease.release(); rerr != nil {
				s.log.Warn("lease not released; another store's instance can start when it expires", "err", rerr, "ttl", s.lease.ttl)
			}
		}
		s.finish(s.err)
		s.stopErr = err
		if err == nil {
			s.log.Info("service stopped")
		}
	})
	return s.stopErr
}
