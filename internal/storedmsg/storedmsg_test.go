package storedmsg_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// receiptMsg is a stored receipt's headers as the executor writes them.
func receiptMsg(subject string, seq uint64, outcome string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(seq, 10))
	if outcome != "" {
		m.Header.Set(topology.HeaderOutcome, outcome)
	}
	m.Data = []byte(outcome)
	return m
}

func TestNextReadsTheMessagesOfOneSubjectInOrder(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(m *nats.Msg) uint64 {
		t.Helper()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	first := publish(receiptMsg("r.a", 3, document.OutcomeRejected))
	publish(receiptMsg("r.b", 4, document.OutcomeCreated))
	second := publish(receiptMsg("r.a", 5, document.OutcomeReplayed))

	g := storedmsg.NewGetter(js, "R")
	m1, err := g.Next(ctx, "r.a", storedmsg.From{Seq: first})
	if err != nil || m1 == nil {
		t.Fatalf("reading r.a at %d: %v, %v", first, m1, err)
	}
	between := m1.Time.Add(time.Nanosecond) // after the first, by the stream's clock
	for _, tc := range []struct {
		name string
		from storedmsg.From
		want uint64 // 0: none
	}{
		{"from the stream's start", storedmsg.From{}, first},
		{"from the first", storedmsg.From{Seq: first}, first},
		{"past the first, over another subject's message", storedmsg.From{Seq: first + 1}, second},
		{"past the last", storedmsg.From{Seq: second + 1}, 0},
		{"from a time between the two", storedmsg.From{Time: between}, second},
		{"from a time after the last", storedmsg.From{Time: time.Now().Add(time.Hour)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := g.Next(ctx, "r.a", tc.from)
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.want == 0 && m != nil:
				t.Fatalf("got r.a at %d, want none", m.Sequence)
			case tc.want == 0:
			case m == nil:
				t.Fatalf("got none, want r.a at %d", tc.want)
			case m.Sequence != tc.want || m.Subject != "r.a":
				t.Fatalf("got %s at %d, want r.a at %d", m.Subject, m.Sequence, tc.want)
			}
		})
	}

	m, err := g.Next(ctx, "r.a", storedmsg.From{Seq: second})
	if err != nil || m == nil {
		t.Fatalf("reading r.a at %d: %v, %v", second, m, err)
	}
	if seq, ok := storedmsg.Ends(m.Header); !ok || seq != 5 {
		t.Errorf("the stored replayed receipt of message 5 ends %d, %v; want 5, true", seq, ok)
	}
	if string(m.Data) != document.OutcomeReplayed {
		t.Errorf("data %q, want %q", m.Data, document.OutcomeReplayed)
	}
}

func TestEndsReadsTheHeadersOfATerminalReceiptOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    nats.Header
		seq  uint64
		ok   bool
	}{
		{"a created receipt", receiptMsg("r", 9, document.OutcomeCreated).Header, 9, true},
		{"a dead-lettered receipt", receiptMsg("r", 9, document.OutcomeDeadLettered).Header, 9, true},
		{"an outcome that ends nothing", receiptMsg("r", 9, "pending").Header, 0, false},
		{"no outcome", receiptMsg("r", 9, "").Header, 0, false},
		{"no message named", nats.Header{topology.HeaderOutcome: {document.OutcomeCreated}}, 0, false},
		{"a message named badly", nats.Header{topology.HeaderStreamSeq: {"nine"}, topology.HeaderOutcome: {document.OutcomeCreated}}, 0, false},
		{"no headers", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok := storedmsg.Ends(tc.h)
			if seq != tc.seq || ok != tc.ok {
				t.Fatalf("Ends = %d, %v; want %d, %v", seq, ok, tc.seq, tc.ok)
			}
		})
	}
}

func TestTheGetterAsksThroughItsContextsAPIPrefixOrDomain(t *testing.T) {
	js := testenv.JetStream(t)
	nc := js.Conn()
	withDomain, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatal(err)
	}
	withPrefix, err := jetstream.NewWithAPIPrefix(nc, "other.API")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		js   jetstream.JetStream
		want string
	}{
		{"the default", js, "$JS.API."},
		{"a domain", withDomain, "$JS.hub.API."},
		{"an API prefix", withPrefix, "other.API."},
	} {
		if got := storedmsg.APIPrefix(tc.js); got != tc.want {
			t.Errorf("%s: APIPrefix = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Nobody answers under the domain "hub": the getter asked there, not
	// at the default prefix (where the server would say the stream is not
	// found).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := storedmsg.NewGetter(withDomain, "R").Next(ctx, "r.a", storedmsg.From{}); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a message get under a domain nobody serves: %v, want %v", err, nats.ErrNoResponders)
	}
	if _, err := storedmsg.NewGetter(js, "R").Next(ctx, "r.a", storedmsg.From{}); err == nil || errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a message get of a stream that does not exist: %v, want the server's refusal", err)
	}
}
