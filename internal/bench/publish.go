package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// pubAck is the stream's answer to a publish or to a batch commit.
type pubAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	Batch     string              `json:"batch,omitempty"`
	Count     int                 `json:"count,omitempty"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

// publishAtomicSeqs stores msgs on stream as one atomic batch (one message is
// published alone) and returns the stream sequence of each message. Every
// message gets a message id of its own: each is a real send.
func publishAtomicSeqs(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) ([]uint64, error) {
	id := nuid.Next()
	last := len(msgs) - 1
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(jetstream.MsgIDHeader, "bench-"+nuid.Next())
		m.Header.Set(jetstream.ExpectedStreamHeader, stream)
		if len(msgs) > 1 {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		}
		if i < last {
			if err := nc.PublishMsg(m); err != nil {
				return nil, err
			}
			continue
		}
		if len(msgs) > 1 {
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		reply, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("publishing %d messages on %s: %w", len(msgs), stream, err)
		}
		var ack pubAck
		if err := json.Unmarshal(reply.Data, &ack); err != nil {
			return nil, fmt.Errorf("reading the ack of %d messages on %s: %w", len(msgs), stream, err)
		}
		if ack.Error != nil {
			return nil, fmt.Errorf("publishing %d messages on %s: %w", len(msgs), stream, ack.Error)
		}
		if len(msgs) > 1 && (ack.Batch != id || ack.Count != len(msgs)) {
			return nil, fmt.Errorf("publishing %d messages on %s: the ack names batch %q with %d messages", len(msgs), stream, ack.Batch, ack.Count)
		}
		// A batch is stored in one piece: its messages have consecutive
		// sequences ending with the commit's.
		seqs := make([]uint64, len(msgs))
		for k := range seqs {
			seqs[k] = ack.Seq - uint64(last-k)
		}
		return seqs, nil
	}
	return nil, nil
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
