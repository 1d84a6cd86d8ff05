package embedded

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNotReady is returned when the server does not accept connections in time.
var ErrNotReady = errors.New("embedded: NATS server not ready")

// Options for an embedded server.
type Options struct {
	// Dir holds the JetStream store (Dir/jetstream).
	Dir string
	// Host and Port to listen on; Port -1 picks a free port.
	Host string
	Port int
	// ServerName names the server; default "sendtwice-embedded".
	ServerName string
	// Logging turns on the server's own log lines (to standard error).
	Logging bool
	// Users, when given, are the only users the server accepts, each
	// with its permissions; a client without credentials connects as
	// NoAuthUser (one of Users, or none).
	Users      []*server.User
	NoAuthUser string
}

// ErrAddrInUse means that the address to listen on is taken.
var ErrAddrInUse = errors.New("embedded: address in use")

// checkListen refuses at once an address the server could not listen on
// (the server itself would only fail to become ready). A port taken between
// this check and the server's start still ends in ErrNotReady.
func checkListen(host string, port int) error {
	if port <= 0 {
		return nil // a free port is picked
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: %s: another process listens there; stop it, or give this one another --listen address", ErrAddrInUse, addr)
		}
		return fmt.Errorf("embedded: the NATS server cannot listen on %s: %w", addr, err)
	}
	return l.Close()
}

// Start starts the server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded: a data directory is required")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ServerName == "" {
		o.ServerName = "sendtwice-embedded"
	}
	opts := &server.Options{
		ServerName: o.ServerName,
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   filepath.Join(o.Dir, "jetstream"),
		// fsync before every acknowledgement: the default interval of two
		// minutes loses acknowledged messages on power loss.
		SyncAlways: true,
		NoSigs:     true,
		MaxPayload: 1 << 20,
		Users:      o.Users,
		NoAuthUser: o.NoAuthUser,
	}
	if err := checkListen(o.Host, o.Port); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: configuring the NATS server: %w", err)
	}
	if o.Logging {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("%w: listening on %s:%d", ErrNotReady, o.Host, o.Port)
	}
	return s, nil
}
