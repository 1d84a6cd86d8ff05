package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/sendtwice/sendtwice/internal/executor"
)

// publishAtomicSeqs stores msgs on stream as one atomic batch (one message is
// published alone) with the executor's batch publisher, in their order, and
// returns the stream sequence of each. Every message gets a message id of
// its own: each is a real send.
func publishAtomicSeqs(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) ([]uint64, error) {
	withIDs(stream, msgs)
	ack, err := executor.PublishBatch(ctx, nc, stream, msgs)
	if err != nil {
		return nil, fmt.Errorf("publishing %d messages on %s: %w", len(msgs), stream, err)
	}
	return ack.Seqs(len(msgs)), nil
}

// publishGroup stores msgs on stream as the executor stores a group of
// receipts, in no particular order, and returns the stream sequence of
// each: up to executor.AloneUpTo messages are each published alone, all at
// once (an atomic batch has a fixed cost of its own on the server), more
// as one atomic batch.
func publishGroup(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) ([]uint64, error) {
	if len(msgs) <= 1 || len(msgs) > executor.AloneUpTo {
		return publishAtomicSeqs(ctx, nc, stream, msgs)
	}
	withIDs(stream, msgs)
	return publishEachAlone(ctx, nc, stream, msgs)
}

// withIDs gives every message of msgs a message id of its own and the
// stream it must be stored on.
func withIDs(stream string, msgs []*nats.Msg) {
	for _, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(jetstream.MsgIDHeader, "bench-"+nuid.Next())
		m.Header.Set(jetstream.ExpectedStreamHeader, stream)
	}
}

// publishEachAlone publishes every message of msgs alone, all at once, and
// waits for each one's ack.
func publishEachAlone(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) ([]uint64, error) {
	seqs := make([]uint64, len(msgs))
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() {
			ack, err := executor.PublishBatch(ctx, nc, stream, []*nats.Msg{m})
			seqs[i], errs[i] = ack.Seq, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("publishing %d messages on %s, each alone: %w", len(msgs), stream, err)
	}
	return seqs, nil
}

// storeAll stores bodies on stream (subject i for body i) in atomic batches
// of up to batch messages, up to 4 batches at once, and returns the stream
// sequence of each. progress, if set, is called with the number stored so
// far.
func storeAll(ctx context.Context, nc *nats.Conn, stream string, subjects []string, bodies [][]byte, batch int, progress func(int)) ([]uint64, error) {
	seqs := make([]uint64, len(bodies))
	batch = max(min(batch, 1000), 1)
	type span struct{ lo, hi int }
	spans := make(chan span)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	stored := 0
	for range 4 {
		wg.Go(func() {
			for s := range spans {
				msgs := make([]*nats.Msg, 0, s.hi-s.lo)
				for i := s.lo; i < s.hi; i++ {
					msgs = append(msgs, &nats.Msg{Subject: subjects[i], Data: bodies[i], Header: nats.Header{}})
				}
				got, err := publishAtomicSeqs(ctx, nc, stream, msgs)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					copy(seqs[s.lo:s.hi], got)
					stored += len(got)
					if progress != nil {
						progress(stored)
					}
				}
				mu.Unlock()
			}
		})
	}
	for lo := 0; lo < len(bodies); lo += batch {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		spans <- span{lo, min(lo+batch, len(bodies))}
	}
	close(spans)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return seqs, firstErr
}
