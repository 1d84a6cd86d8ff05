package deploytest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// A tenant that sends envelopes of the largest size the stream takes, as
// fast as it can, filled APPROVALS, and every other tenant's send then
// failed "maximum bytes exceeded". Each tenant's approvals now go through
// an intake stream of its own, bounded by --tenant-max-bytes, from which
// APPROVALS sources them: the flood is refused at the tenant's own bound,
// and another tenant's send is stored and answered.
func TestATenantThatFillsApprovalsLeavesOthersSending(t *testing.T) {
	dav := davtest.Start(t, davtest.Radicale, davtest.Options{})
	const approvalsBytes, tenantBytes = 4 << 20, 1 << 20
	p := startAuthPipelineProvisioned(t, []string{"--max-bytes", strconv.Itoa(approvalsBytes),
		"--tenants", strings.Join(tenants, ","), "--tenant-max-bytes", strconv.Itoa(tenantBytes)},
		"--task-service", "caldav", "--caldav-url", dav.CollectionURL)
	seed := testenv.SeedFor(t, scenario.CalDAV)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Tenant A: envelopes of the largest valid size, each on a key of its
	// own, then of half the size each time one is refused, down to 1 KiB:
	// a full stream leaves no room for another tenant's approval.
	ajs, _ := jetstream.New(connectAs(t, p.url, "tenant-a", p.pw["tenant-a"]).Conn)
	var refused error
	stored, size := 0, topology.MaxEnvelopeBytes
	for i := 0; size >= 1<<10 && i < 4*approvalsBytes/(1<<10); i++ {
		m := nats.NewMsg("approvals.tenant-a.flood-" + strconv.Itoa(i))
		m.Data = []byte(strings.Repeat("x", size))
		_, err := ajs.PublishMsg(ctx, m)
		switch {
		case err == nil:
			stored += size
		case refused == nil:
			refused = err
			fallthrough
		default:
			size /= 2
		}
	}
	if refused == nil {
		t.Fatalf("tenant-a stored %d bytes and was never refused", stored)
	}
	if stored > tenantBytes {
		t.Errorf("tenant-a stored %d bytes before it was refused (%v), want at most %d: its bound", stored, refused, tenantBytes)
	}

	// Tenant B sends a valid approval of its own scope and gets its receipt.
	approved, err := seed.InScope(seed.Original, "tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	e, err := send.ParseEnvelope(approved.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	bjs, _ := jetstream.New(connectAs(t, p.url, "tenant-b", p.pw["tenant-b"]).Conn)
	sent, rc, err := send.NewClient(bjs).Send(ctx, e)
	if err != nil || rc.Outcome != send.Created {
		t.Fatalf("tenant-b's send after tenant-a's flood: %+v, %+v, %v; want its approval created", sent, rc, err)
	}

	// Tenant A's own send of a valid approval, through the SDK, is refused
	// naming its bound.
	mine, err := seed.InScope(seed.NewIntent, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	ea, _ := send.ParseEnvelope(mine.Envelope())
	_, err = send.NewClient(ajs).Publish(ctx, ea)
	if !errors.Is(err, send.ErrNotPublished) || !strings.Contains(err.Error(), "--tenant-max-bytes") {
		t.Errorf("tenant-a's send past its bound: %v; want refused naming --tenant-max-bytes", err)
	}
	p.statusAndVerify(t)
}

// sourcedSeq is the APPROVALS sequence of the copy of the message an
// intake stream acknowledged with ack on subject, read as a tenant may read
// it: a direct get of the last approval on subject, once its
// Nats-Stream-Source header names the intake's message.
func sourcedSeq(ctx context.Context, t *testing.T, nc *nats.Conn, subject string, ack *jetstream.PubAck) uint64 {
	t.Helper()
	for ctx.Err() == nil {
		m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+topology.ApprovalsStream+"."+subject, nil)
		if err != nil {
			t.Fatalf("reading the last approval on %s: %v", subject, err)
		}
		stream, seq, ok := topology.SourcedFrom(m.Header.Get(topology.HeaderStreamSource))
		if ok && stream == ack.Stream && seq == strconv.FormatUint(ack.Sequence, 10) {
			n, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the message %s stored as %d never reached %s", ack.Stream, ack.Sequence, topology.ApprovalsStream)
	return 0
}
