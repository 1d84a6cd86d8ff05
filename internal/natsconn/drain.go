package natsconn

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// DrainTimeout is how long Drain waits for the connection to close, unless
// told otherwise: long enough for the replies of calls in flight.
const DrainTimeout = 10 * time.Second

// ErrDrainTimeout is returned (wrapped) by Drain when the connection did not
// close in time; it has been closed at once then.
var ErrDrainTimeout = errors.New("natsconn: drain timed out")

// Drain drains nc and waits until it is closed, at most timeout (0:
// DrainTimeout); after that it closes it at once. A connection that is
// already closed is not an error. Drain replaces nc's closed handler.
//
// When draining cannot start, nc is closed and the error returned; when the
// wait runs out, nc is closed and the error wraps ErrDrainTimeout. Either
// way nc is closed when Drain returns.
func Drain(nc *nats.Conn, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DrainTimeout
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("natsconn: draining: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		nc.Close()
		return fmt.Errorf("%w after %s; closed", ErrDrainTimeout, timeout)
	}
}
