package embedded

import (
	"errors"
	"fmt"
	"path/filepath"
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
