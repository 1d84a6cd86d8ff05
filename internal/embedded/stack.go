package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/natsconn"
	"github.com/sendtwice/sendtwice/internal/provider"
)

// StackOptions configure a one-process deployment: a NATS server with
// JetStream and the fake task service, both keeping their data under Dir.
type StackOptions struct {
	Dir         string
	Host        string
	Port        int
	AllowFaults bool
	// NoService starts the NATS server alone: the fake task service is not
	// started and its store (Dir/provider) is neither opened nor made, for
	// executors that call another task service (CalDAV, Redmine).
	NoService bool
	// UnsafeCreateEveryCall breaks the task service on purpose (it creates
	// on every call), to show that the checker fails. Tests only.
	UnsafeCreateEveryCall bool
	// KeyClockAllowance, KeyMargin, RecordsRetention and CompactEvery are
	// the task service's key lifetime, records retention and compaction
	// period (provider.Options: 0 = the service's defaults, negative =
	// none; retention 0 = forever; CompactEvery negative = no background
	// compaction).
	KeyClockAllowance time.Duration
	KeyMargin         time.Duration
	RecordsRetention  time.Duration
	CompactEvery      time.Duration
	// Clock is the task service's clock (provider.Options.Clock; nil =
	// time.Now), for tests that move it on to compact keys.
	Clock  func() time.Time
	Logger *slog.Logger
	// Users and NoAuthUser are the server's (Options); the task service
	// connects without credentials, so as NoAuthUser.
	Users      []*server.User
	NoAuthUser string
	// Purpose, when set, says why this stack's stores are new and replaced
	// on purpose (the demo's); the task service then logs a new store and
	// its adoption at INFO with it (provider.Options.NewReason,
	// provider.ServiceConfig.ReplaceReason), not as a deployment's alarm.
	Purpose string
}

// Stack is a running NATS server and task service. The service is reached
// over NATS like any external system, also from within this process. With
// StackOptions.NoService, Store and Service stay nil until StartService.
type Stack struct {
	opts    StackOptions
	lock    *DirLock
	Server  *server.Server
	Store   *provider.Store
	Service *provider.Service
	hosted  *provider.Hosted
}

// StartStack locks the data directory, then starts the server and the
// service. The lock comes first: a second stack on the same directory is
// refused (ErrDirLocked) before it starts anything, so it never opens the
// JetStream store that the first one is using.
func StartStack(o StackOptions) (*Stack, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Dir == "" {
		return nil, errors.New("embedded: a data directory is required")
	}
	lock, err := LockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	s, err := Start(Options{Dir: o.Dir, Host: o.Host, Port: o.Port, Users: o.Users, NoAuthUser: o.NoAuthUser})
	if err != nil {
		return nil, errors.Join(err, lock.Unlock())
	}
	st := &Stack{opts: o, lock: lock, Server: s}
	if o.NoService {
		return st, nil
	}
	if err := st.StartService(filepath.Join(o.Dir, "provider")); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.Join(err, lock.Unlock())
	}
	return st, nil
}

// Dir is the stack's data directory as an absolute path.
func (st *Stack) Dir() string { return st.lock.Dir() }

// URL is the client URL of the server.
func (st *Stack) URL() string { return st.Server.ClientURL() }

// StartService opens the task service's store in dir and serves it, through
// provider.Host. The store must be the one this deployment adopted (the
// first store served on the stack's NATS data, or one adopted since): any
// other is refused (provider.ErrNotAdopted); see StartServiceReplacing.
func (st *Stack) StartService(dir string) error {
	return st.startService(dir, "")
}

// StartServiceReplacing is StartService for a store that replaces the
// adopted store named by replaces: the operator's act of provider adopt,
// done at the start (provider.ServiceConfig.Replaces). Every intent the
// replaced store knew is created again when its approval is resent; the
// demo does this on purpose to show a service that has forgotten.
func (st *Stack) StartServiceReplacing(dir, replaces string) error {
	if replaces == "" {
		return errors.New("embedded: name the store to replace")
	}
	return st.startService(dir, replaces)
}

func (st *Stack) startService(dir, replaces string) error {
	if st.Service != nil {
		return errors.New("embedded: the task service is already running")
	}
	connect := func() (*nats.Conn, error) {
		nc, err := natsconn.Connect(st.URL(), "fake-task-provider")
		if err != nil {
			return nil, fmt.Errorf("embedded: connecting the task service: %w", err)
		}
		return nc, nil
	}
	h, err := provider.Host(dir,
		provider.Options{Logger: st.opts.Logger, UnsafeCreateEveryCall: st.opts.UnsafeCreateEveryCall,
			KeyClockAllowance: st.opts.KeyClockAllowance, KeyMargin: st.opts.KeyMargin, RecordsRetention: st.opts.RecordsRetention,
			CompactEvery: st.opts.CompactEvery, Clock: st.opts.Clock, NewReason: st.opts.Purpose},
		provider.ServiceConfig{AllowFaults: st.opts.AllowFaults, Logger: st.opts.Logger, Replaces: replaces, ReplaceReason: st.opts.Purpose}, connect)
	if errors.Is(err, provider.ErrNotAdopted) {
		return fmt.Errorf("embedded: starting the task service: %w; here the deployment is the data directory %s: its NATS data (jetstream) was used with the adopted store, so restore that store's directory, or use an empty data directory for a new deployment",
			err, st.Dir())
	}
	if err != nil {
		return fmt.Errorf("embedded: starting the task service: %w", err)
	}
	st.hosted, st.Store, st.Service = h, h.Store, h.Service
	return nil
}

// StopService stops the task service and closes its store (provider.Hosted.Stop);
// the NATS server keeps running.
func (st *Stack) StopService() error {
	if st.hosted == nil {
		return nil
	}
	err := st.hosted.Stop()
	st.hosted, st.Service, st.Store = nil, nil, nil
	return err
}

// Close stops the service, shuts the server down and releases the data
// directory.
func (st *Stack) Close() error {
	err := st.StopService()
	st.Server.Shutdown()
	st.Server.WaitForShutdown()
	return errors.Join(err, st.lock.Unlock())
}
