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
		return nil, fmt.Errorf("%w: %w: %v", ErrNotEnvelope, ErrInvalid, err)
	}
	return newEnvelope(append([]byte(nil), data...)), nil
}

// Unchecked takes data as a message without reading it as an envelope:
// publishing it stores data byte for byte, on the subject of the key an
// executor reads from it (the default scope and no intent when it names
// none). It is for data that must reach the executors as it is, such as a
// dead letter's payload sent again or a test's malformed message; the
// executors' gate rejects, with a receipt, what is not a task-envelope.v1
// message. Use Build or ParseEnvelope for anything else.
func Unchecked(data []byte) *Envelope {
	return newEnvelope(append([]byte(nil), data...))
}
