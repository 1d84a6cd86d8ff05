package testenv

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/send"
)

// Receipt is a receipt as the RECEIPTS stream stored it, decoded, with its
// bytes.
type Receipt struct {
	*document.Receipt
	Raw []byte
}

// Publish publishes data as it is (send.Unchecked: the executors' gate
// judges it) through package send, with opts (send.MsgID for a retried
// publish).
func Publish(ctx context.Context, js jetstream.JetStream, data []byte, opts ...send.Option) (send.Sent, error) {
	return send.NewClient(js).Publish(ctx, send.Unchecked(data), opts...)
}

// WaitReceipt waits through package send for the first terminal receipt of
// the approval message at seq, published for the key (scope, intentID).
func WaitReceipt(ctx context.Context, js jetstream.JetStream, scope, intentID string, seq uint64) (*Receipt, error) {
	r, err := send.NewClient(js).WaitReceipt(ctx, send.Sent{Scope: scope, IntentID: intentID, StreamSeq: seq})
	if err != nil {
		return nil, err
	}
	return decoded(r)
}

// Decoded is r decoded as the executors wrote it.
func decoded(r *send.Receipt) (*Receipt, error) {
	rc, err := document.DecodeReceipt(r.Raw)
	if err != nil {
		return nil, fmt.Errorf("testenv: decoding the receipt: %w", err)
	}
	return &Receipt{Receipt: rc, Raw: r.Raw}, nil
}

// Listener waits for the receipts of many messages on one send.Listener.
type Listener struct{ *send.Listener }

// NewListener listens for no key yet.
func NewListener(js jetstream.JetStream) Listener {
	return Listener{send.NewClient(js).NewListener()}
}

// Wait is Listener.Receipt, decoded.
func (l Listener) Wait(ctx context.Context, scope, intentID string, seq uint64) (*Receipt, error) {
	r, err := l.Receipt(ctx, send.Sent{Scope: scope, IntentID: intentID, StreamSeq: seq})
	if err != nil {
		return nil, err
	}
	return decoded(r)
}
