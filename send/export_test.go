package send

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// What the package's own tests (package send_test, which use the
// internal test environment) reach of its unexported parts.

type (
	ReceiptWatch  = receiptWatch
	StoredReceipt = storedReceipt
)

var (
	NewReceiptWatch = newReceiptWatch
	StartSend       = startSend
)

// PublishKey publishes data on the key's subject under a new message id.
func PublishKey(ctx context.Context, js jetstream.JetStream, scope, intentID string, data []byte) (Sent, error) {
	return publishKey(ctx, js, scope, intentID, data, options{msgID: NewMsgID()})
}
