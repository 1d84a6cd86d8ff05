package send_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// A tenant that sends messages as large as it can, 250 KiB as the stream
// took before, has them refused by the APPROVALS stream itself: the stream
// takes the largest valid envelope and a message at its bound, refuses one
// byte more, and the SDK's error names the bound.
func TestAMessageLargerThanAnyValidEnvelopeIsRefusedByTheStream(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	largest, err := scenario.Largest()
	if err != nil {
		t.Fatal(err)
	}
	e, err := send.ParseEnvelope(largest.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send.NewClient(env.JS).Publish(ctx, e); err != nil {
		t.Fatalf("the largest valid envelope was not stored: %v", err)
	}
	// A bare publish carries no headers: the bound is the body's.
	subject := subjects.Approval("", "intent-0001")
	if _, err := env.JS.Publish(ctx, subject, bytes.Repeat([]byte("x"), topology.ApprovalMaxMsg)); err != nil {
		t.Fatalf("a message at the bound was refused: %v", err)
	}
	stored := lastSeq(t, env.JS)
	for _, size := range []int{topology.ApprovalMaxMsg + 1, 250 << 10} {
		_, err := env.JS.Publish(ctx, subject, bytes.Repeat([]byte("x"), size))
		var api *jetstream.APIError
		if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum {
			t.Errorf("a %d-byte message: %v; want the stream's refusal of a message over its maximum", size, err)
		}
	}
	_, err = send.NewClient(env.JS).Publish(ctx, send.Unchecked(bytes.Repeat([]byte("x"), 250<<10)))
	if !errors.Is(err, send.ErrNotPublished) || !strings.Contains(err.Error(), "larger than any valid envelope (at most 86016 bytes") {
		t.Errorf("publishing 250 KiB through the SDK: %v; want ErrNotPublished naming the bound", err)
	}
	if n := lastSeq(t, env.JS); n != stored {
		t.Errorf("the stream holds %d messages after the refusals, want %d", n, stored)
	}
}
