package send

import (
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/document"
)

// ErrNotEnvelope is returned by ParseEnvelope for data that is not a
// task-envelope.v1 message.
var ErrNotEnvelope = errors.New("send: not a task-envelope.v1 message")

// ParseEnvelope takes a task-envelope.v1 message as it was stored (a file
// written by Envelope.Bytes, a message read from the stream), to publish it
// again byte for byte. It checks the envelope's own members only, strictly:
// run a Check to judge the documents inside, or the executors' gate decides
// alone.
func ParseEnvelope(data []byte) (*Envelope, error) {
	if _, err := document.SplitEnvelope(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotEnvelope, err)
	}
	return &Envelope{data: append([]byte(nil), data...)}, nil
}
