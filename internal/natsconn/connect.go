package natsconn

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/redact"
)

// Connect connects to url (a comma-separated list of servers) as the
// client called name, and once connected reconnects without limit, every
// 250 ms, each attempt bounded by 5 s. opts come after these defaults and
// may override them. The error names the server list without what may be
// secret in it.
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, fmt.Errorf("natsconn: connecting to NATS at %s: %w", redact.URLs(url), err)
	}
	return nc, nil
}
