package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// This file judges the streams and the executors' consumer against what
// provisioning applied (topology.ReadRecord), not against what they say of
// themselves now, and reports the records the pipeline does not write.
// Whoever lowers APPROVALS' MaxAge, raises a limit or rewrites the
// consumer changes the live configuration, not the record: the change is
// reported, and the audit's window is drawn with the MaxAge provisioned.

// Topology is what the audit read of the streams' and the consumer's
// configuration.
type Topology struct {
	// Provisioned is the record of what provisioning applied; nil when
	// there is none (RecordErr says why when it exists but was not read).
	Provisioned *topology.Provisioned
	RecordErr   string
	// Streams are the three streams' live configurations, by name; nil or
	// absent when the stream does not exist.
	Streams map[string]*jetstream.StreamConfig
	// Consumer is the executors' consumer's live configuration; nil when
	// it does not exist.
	Consumer *jetstream.ConsumerConfig
}

// provisioned is what the streams and the consumer must be: the record,
// or without one what topology makes of its defaults.
func (t *Topology) provisioned() topology.Provisioned {
	if t != nil && t.Provisioned != nil {
		return *t.Provisioned
	}
	return topology.Intended(topology.Config{})
}

// source says where provisioned comes from.
func (t *Topology) source() string {
	if t != nil && t.Provisioned != nil {
		return "as provisioned"
	}
	return "the topology's default: no record of what was provisioned"
}

// readTopology reads the record of what was provisioned and the live
// configurations. A record that does not decode is reported, not fatal.
func readTopology(ctx context.Context, js jetstream.JetStream) (*Topology, error) {
	t := &Topology{Streams: map[string]*jetstream.StreamConfig{}}
	p, err := topology.ReadRecord(ctx, js)
	switch {
	case err == nil:
		t.Provisioned = &p
	case !errors.Is(err, topology.ErrNoRecord):
		t.RecordErr = err.Error()
	}
	for _, name := range topology.StreamNames {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: reading stream %s: %w", name, err)
		}
		sc := s.CachedInfo().Config
		t.Streams[name] = &sc
	}
	c, err := js.Consumer(ctx, topology.ApprovalsStream, topology.Consumer)
	switch {
	case err == nil:
		cc := c.CachedInfo().Config
		t.Consumer = &cc
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("audit: reading consumer %s: %w", topology.Consumer, err)
	}
	return t, nil
}

// checkProvisioned makes as-provisioned: the streams and the executors'
// consumer are as provisioning recorded them: every field of each live
// configuration equals the record's. With no record, that absence fails the
// check, and the live configurations are compared with what topology makes of
// its defaults.
func checkProvisioned(c *Check, in *Input) {
	t := in.Topology
	if t == nil {
		c.violate("the streams' and the consumer's configuration was not read")
		return
	}
	switch {
	case t.RecordErr != "":
		c.violate("the record of what was provisioned (bucket %s) cannot be read: %s; compared with the topology's defaults instead", topology.RecordBucket, t.RecordErr)
	case t.Provisioned == nil:
		c.violate("no record of what was provisioned (bucket %s): provisioned by an older version, or the record was deleted; "+
			"run executor provision with the deployment's settings to record it. Compared with the topology's defaults instead", topology.RecordBucket)
	default:
		c.note("provisioned at %s", t.Provisioned.At.UTC().Format(time.RFC3339))
	}
	diffs := t.provisioned().Diff(t.Streams, t.Consumer)
	for _, d := range diffs {
		c.violate("%s", d)
	}
	c.fig("streams and consumers compared", len(topology.StreamNames)+1)
	c.fig("differences from what was provisioned", len(diffs))
}

// checkForeign makes no-foreign-records: every dead letter decodes, and no
// status message was stored as an approval: records the pipeline does not
// write, each named by its stream and sequence. (Receipts that do not decode
// are check 8's.)
func checkForeign(c *Check, in *Input) {
	counts := map[string]int{}
	for _, u := range in.Foreign {
		counts[u.Stream]++
		forMsg := ""
		if u.StreamSeq != 0 {
			forMsg = fmt.Sprintf(" (for message %d)", u.StreamSeq)
		}
		c.violate("the record at %s sequence %d%s does not decode: %s", u.Stream, u.Seq, forMsg, u.Err)
	}
	c.fig("dead letters read", len(in.DeadLetters)+counts[topology.DeadLetterStream])
	c.fig("dead letters that do not decode", counts[topology.DeadLetterStream])
	c.fig("status messages stored as approvals", counts[topology.ApprovalsStream])
}
