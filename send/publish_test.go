package send_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

func envelope(t *testing.T) []byte {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s.Original.Envelope()
}

// parsed is the scenario's original envelope.
func parsed(t *testing.T) *send.Envelope {
	t.Helper()
	e, err := send.ParseEnvelope(envelope(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func lastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	return testenv.StreamState(t, js, topology.ApprovalsStream).LastSeq
}

func TestPublishStoresTheCallersHeadersBesideItsMessageID(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set("Sendtwice-Test", "kept")
	sent, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-with-headers-1"), send.Header(h))
	if err != nil {
		t.Fatal(err)
	}
	if sent.Subject != subjects.Approval("", "intent-0001") || sent.IntentID != "intent-0001" || sent.Duplicate {
		t.Fatalf("sent %+v", sent)
	}
	if h := stored(t, env.JS, sent.StreamSeq); h.Get("Sendtwice-Test") != "kept" || h.Get(jetstream.MsgIDHeader) != "send-with-headers-1" {
		t.Fatalf("stored headers %v", h)
	}
	again, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-with-headers-1"), send.Header(h))
	if err != nil || !again.Duplicate || again.StreamSeq != sent.StreamSeq {
		t.Fatalf("a retry with the same id: %+v, %v; want the first message, as a duplicate", again, err)
	}
}

func TestPublishRefusesAMessageIDInTheHeadersAndStoresNothing(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := nats.Header{}
	h.Set(jetstream.MsgIDHeader, "smuggled")
	if _, err := send.NewClient(env.JS).Publish(ctx, parsed(t), send.MsgID("send-own-id"), send.Header(h)); !errors.Is(err, send.ErrOption) || !strings.HasPrefix(err.Error(), "send: ") {
		t.Fatalf("a message id in the headers: %v; want send.ErrOption", err)
	}
	if n := lastSeq(t, env.JS); n != 0 {
		t.Fatalf("the APPROVALS stream holds %d messages, want none", n)
	}
}

func TestTheDeadlineBoundsThePublishAndTheWait(t *testing.T) {
	env := testenv.Start(t) // no executor: no receipt ever comes
	c := send.NewClient(env.JS)
	if _, err := c.Publish(context.Background(), parsed(t), send.Deadline(time.Now().Add(-time.Second))); !errors.Is(err, send.ErrNotPublished) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a publish past its deadline: %v; want ErrNotPublished and the deadline", err)
	}
	if n := lastSeq(t, env.JS); n != 0 {
		t.Fatalf("the APPROVALS stream holds %d messages, want none", n)
	}
	sent, r, err := c.Send(context.Background(), parsed(t), send.Timeout(500*time.Millisecond))
	var ended *send.NoReceiptError
	if r != nil || !errors.As(err, &ended) || !errors.Is(err, context.DeadlineExceeded) || ended.StreamSeq != sent.StreamSeq || sent.StreamSeq == 0 {
		t.Fatalf("a send whose receipt never comes: %+v, %v, %v; want a NoReceiptError at the deadline for its message", sent, r, err)
	}
	if _, err := c.Publish(context.Background(), parsed(t), send.MsgID("")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("an empty message id: %v; want ErrOption", err)
	}
}

// A Timeout option counts from the start of each call it is given to, not
// from when it was made: options built once serve every later call.
func TestATimeoutMadeOnceBoundsEachCallFromItsStart(t *testing.T) {
	env := testenv.Start(t)
	opts := []send.Option{send.Timeout(time.Second)}
	time.Sleep(1100 * time.Millisecond) // the option is older than its timeout
	sent, err := send.NewClient(env.JS).Publish(context.Background(), parsed(t), opts...)
	if err != nil || sent.StreamSeq == 0 {
		t.Fatalf("a publish with a Timeout option made before its duration passed: %+v, %v; want it stored", sent, err)
	}
}

// One message id names one envelope: a client refuses an id it published
// for another envelope, before listening or publishing, so that no Send
// waits for the receipt of another envelope's message. The same envelope
// under its own id again is a retry the stream stores once.
func TestAMessageIDUsedForAnotherEnvelopeIsRefused(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	original, err := send.ParseEnvelope(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	changed, err := send.ParseEnvelope(s.Changed.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	c := send.NewClient(env.JS)
	if _, err := c.Publish(ctx, original, send.MsgID("send-one-envelope")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, changed, send.MsgID("send-one-envelope")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("publishing another envelope under a used id: %v; want ErrOption", err)
	}
	if _, _, err := c.Send(ctx, changed, send.MsgID("send-one-envelope")); !errors.Is(err, send.ErrOption) {
		t.Fatalf("sending another envelope under a used id: %v; want ErrOption", err)
	}
	if n := lastSeq(t, env.JS); n != 1 {
		t.Fatalf("the APPROVALS stream holds %d messages, want the first only", n)
	}
	again, err := c.Publish(ctx, original, send.MsgID("send-one-envelope"))
	if err != nil || !again.Duplicate || again.StreamSeq != 1 {
		t.Fatalf("the same envelope under its id again: %+v, %v; want the stored message", again, err)
	}
}

// consumers counts the consumers of stream.
func consumers(t *testing.T, env *testenv.Env, stream string) int {
	t.Helper()
	return testenv.StreamState(t, env.JS, stream).Consumers
}

// A publisher that may create no consumer (nor read stream information)
// sends and waits for its receipts: created, then replayed, whichever way
// it waits, and the server refused it nothing.
func TestAPublisherThatMayCreateNoConsumerGetsItsReceipts(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	env.Executor(executor.Config{ID: "exec-1"})
	e := built(t)
	js, violations := env.ConnectPublisher()
	c := send.NewClient(js)
	// publishThen publishes e and then reads its receipt with receipt.
	publishThen := func(ctx context.Context, receipt func(context.Context, send.Sent) (*send.Receipt, error)) (send.Sent, *send.Receipt, error) {
		sent, err := c.Publish(ctx, e)
		if err != nil {
			return sent, nil, err
		}
		r, err := receipt(ctx, sent)
		return sent, r, err
	}
	for _, tc := range []struct {
		name string
		wait func(ctx context.Context) (send.Sent, *send.Receipt, error)
		want send.Outcome
	}{
		{"Send publishes and waits: created", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			return c.Send(ctx, e)
		}, send.Created},
		{"Publish and then WaitReceipt: replayed", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			return publishThen(ctx, c.WaitReceipt)
		}, send.Replayed},
		{"Listen, Publish and Receipt: replayed", func(ctx context.Context) (send.Sent, *send.Receipt, error) {
			l, err := c.Listen(e)
			if err != nil {
				return send.Sent{}, nil, err
			}
			defer l.Close()
			return publishThen(ctx, l.Receipt)
		}, send.Replayed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sent, r, err := tc.wait(ctx)
			if err != nil {
				t.Fatalf("%v (the server refused: %v)", err, violations.Seen())
			}
			if r.Outcome != tc.want || r.Delivery.StreamSeq != sent.StreamSeq || r.TaskID != "fake-task-0001" {
				t.Fatalf("receipt %s for message %d, want %s of fake-task-0001", r.Raw, sent.StreamSeq, tc.want)
			}
		})
	}
	if v := violations.Seen(); len(v) > 0 {
		t.Errorf("the server refused the publisher: %v", v)
	}
	if n := consumers(t, env, topology.ReceiptsStream); n != 0 {
		t.Errorf("RECEIPTS has %d consumers, want none", n)
	}
}

// The publisher's rights are what the test says they are: it may not
// create a consumer on RECEIPTS, so the receipts above came without one.
func TestThePublisherOfTheTestsMayCreateNoConsumer(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	js, _ := env.ConnectPublisher()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := js.OrderedConsumer(ctx, topology.ReceiptsStream, jetstream.OrderedConsumerConfig{})
	if err == nil {
		t.Fatal("the publisher created an ordered consumer on RECEIPTS")
	}
	_, err = js.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "mine"})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("the publisher created a durable consumer on RECEIPTS: %v", err)
	}
}

// A listener that cannot subscribe says so once, in send's words: one
// "send: " prefix, with the subject and the connection's cause.
func TestAListenFailureSaysSendOnce(t *testing.T) {
	env := testenv.Start(t)
	nc, err := nats.Connect(env.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := send.NewClient(js)
	nc.Close()
	l := c.NewListener()
	defer l.Close()
	err = l.WatchKey("", "intent-0001")
	if err == nil || strings.Count(err.Error(), "send: ") != 1 || !strings.HasPrefix(err.Error(), "send: ") || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("listening on a closed connection: %v; want one \"send: \" prefix and the connection's error", err)
	}
}

// receiptDoc is a created receipt of intent for approval message seq, with
// its own receipt id.
func receiptDoc(t *testing.T, intent string, seq uint64, id string) []byte {
	t.Helper()
	return scenario.Edit(receiptFixture(t, "created.json"), func(m map[string]any) {
		m["receipt_id"], m["intent_id"] = id, intent
		m["delivery"].(map[string]any)["stream_seq"] = seq
	})
}

// receiptMsg is a receipt message as an executor publishes it, naming
// approval message seq in its header.
func receiptMsg(intent string, seq uint64, body []byte) *nats.Msg {
	m := nats.NewMsg(subjects.Receipt("", intent))
	m.Data = body
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(topology.HeaderOutcome, document.OutcomeCreated)
	return m
}

// storeMsg stores m on the RECEIPTS stream.
func storeMsg(js jetstream.JetStream, m *nats.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m, jetstream.WithExpectStream(topology.ReceiptsStream)); err != nil {
		return fmt.Errorf("storing a receipt: %w", err)
	}
	return nil
}

func store(t *testing.T, js jetstream.JetStream, m *nats.Msg) {
	t.Helper()
	if err := storeMsg(js, m); err != nil {
		t.Fatal(err)
	}
}

// receiptID returns the receipt id a receipt carries.
// stageUncommitted stores the receipt id for message seq of intent as the
// first message of a batch it does not commit, and checks that the watch
// does not report it.
func stageUncommitted(t *testing.T, env *testenv.Env, w *send.ReceiptWatch, intent string, seq uint64, batch, id string) {
	t.Helper()
	staged := receiptMsg(intent, seq, receiptDoc(t, intent, seq, id))
	staged.Header.Set("Nats-Batch-Id", batch)
	staged.Header.Set("Nats-Batch-Sequence", "1")
	if err := env.NC.PublishMsg(staged); err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	r, err := w.Wait(ctx, "", intent, seq)
	cancel()
	if r != nil || !errors.Is(err, send.ErrNoReceipt) {
		t.Fatalf("before the commit: got %s, %v; want send.ErrNoReceipt", receiptID(r), err)
	}
}

// commitBatch commits the batch that stageUncommitted began with a second
// receipt (of a message 1000 after seq) and returns the server's answer.
func commitBatch(t *testing.T, env *testenv.Env, intent string, seq uint64, batch string) *nats.Msg {
	t.Helper()
	commit := receiptMsg(intent, seq+1000, receiptDoc(t, intent, seq+1000, "r-commit"))
	commit.Header.Set("Nats-Batch-Id", batch)
	commit.Header.Set("Nats-Batch-Sequence", "2")
	commit.Header.Set("Nats-Batch-Commit", "1")
	ack, err := env.NC.RequestMsg(commit, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// publish publishes the test envelope under intent's key in the default
// scope.
func publish(t *testing.T, js jetstream.JetStream, intent string) send.Sent {
	t.Helper()
	sent, err := send.PublishKey(context.Background(), js, "", intent, envelope(t))
	if err != nil {
		t.Fatal(err)
	}
	return sent
}

// watch opens a receipt watch on js that watches intent in the default
// scope, closed when the test ends.
func watch(t *testing.T, js jetstream.JetStream, intent string) *send.ReceiptWatch {
	t.Helper()
	w := send.NewReceiptWatch(js)
	t.Cleanup(w.Close)
	if err := w.Watch("", intent); err != nil {
		t.Fatal(err)
	}
	return w
}

// wantReceipt waits up to within for the receipt of intent's message seq
// in the default scope and fails the test unless it is receipt id want.
func wantReceipt(t *testing.T, w *send.ReceiptWatch, intent string, seq uint64, within time.Duration, want, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if r, err := w.Wait(ctx, "", intent, seq); err != nil || r.ReceiptID != want {
		t.Fatalf("%s: got %s, %v; want %s", when, receiptID(r), err, want)
	}
}

func receiptID(r *send.StoredReceipt) string {
	if r == nil {
		return ""
	}
	return r.ReceiptID
}

// A wait reports the first terminal receipt the RECEIPTS stream stored for
// its own message: stored before the wait or during it, and never one that
// was only seen published (refused by the stream, or in a batch not yet
// committed), nor another message's.
func TestAWaitReportsTheFirstStoredReceiptOfItsOwnMessage(t *testing.T) {
	env := testenv.Start(t) // no executor: the test stores the receipts
	short := 500 * time.Millisecond
	for i, tc := range []struct {
		name string
		// before runs before the wait, with the intent watched; during runs
		// while the wait runs.
		before, during func(t *testing.T, intent string, seq uint64)
		// unwatched: before runs before the intent is watched, as for a
		// receipt that came between the publish and the subscription.
		unwatched bool
		within    time.Duration
		want      string // the receipt id reported; "" for send.ErrNoReceipt
		wantErr   bool   // an error other than send.ErrNoReceipt
	}{
		{name: "a receipt stored before anyone subscribed is found", unwatched: true,
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-unwatched")))
			}, want: "r-unwatched"},
		{name: "a receipt stored before the wait began is found",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-before")))
			}, want: "r-before"},
		{name: "a receipt stored while the wait runs is found",
			during: func(t *testing.T, intent string, seq uint64) {
				if err := storeMsg(env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-during"))); err != nil {
					t.Error(err)
				}
			}, want: "r-during"},
		{name: "of two receipts of the message stored alone before the wait, the last is the one a direct get reads",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-first")))
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-second")))
			}, want: "r-second"},
		{name: "a receipt hidden from the direct get by a later receipt of its key is found by scanning the key's stored receipts",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-hidden")))
				store(t, env.JS, receiptMsg(intent, seq+1000, receiptDoc(t, intent, seq+1000, "r-later")))
			}, want: "r-hidden"},
		{name: "a receipt the stream refused is not reported although it was seen published",
			before: func(t *testing.T, intent string, seq uint64) {
				m := receiptMsg(intent, seq, receiptDoc(t, intent, seq, "r-refused"))
				m.Header.Set(jetstream.ExpectedStreamHeader, "ANOTHER")
				if _, err := env.JS.PublishMsg(context.Background(), m); err == nil {
					t.Fatal("the stream stored a receipt that expected another stream")
				}
			}, within: short},
		{name: "a receipt of another message of the same intent is not this one's",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq+1000, receiptDoc(t, intent, seq+1000, "r-other")))
			}, within: short},
		{name: "a receipt whose header names the message but whose body names another is not this one's",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, receiptDoc(t, intent, seq+1000, "r-mismatch")))
			}, within: short},
		{name: "a receipt of the message that does not decode is an error",
			before: func(t *testing.T, intent string, seq uint64) {
				store(t, env.JS, receiptMsg(intent, seq, []byte(`{"outcome":"created"`)))
			}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intent := fmt.Sprintf("intent-wait-%d", i)
			sent := publish(t, env.JS, intent)
			w := send.NewReceiptWatch(env.JS)
			defer w.Close()
			if tc.unwatched {
				tc.before(t, intent, sent.StreamSeq)
			}
			if err := w.Watch("", intent); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil && !tc.unwatched {
				tc.before(t, intent, sent.StreamSeq)
			}
			within := tc.within
			if within == 0 {
				within = 10 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			if tc.during != nil {
				go tc.during(t, intent, sent.StreamSeq)
			}
			r, err := w.Wait(ctx, "", intent, sent.StreamSeq)
			switch {
			case tc.wantErr:
				if err == nil || errors.Is(err, send.ErrNoReceipt) {
					t.Fatalf("got %s, %v; want an error that says why", receiptID(r), err)
				}
			case tc.want == "":
				if r != nil || !errors.Is(err, send.ErrNoReceipt) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %s, %v; want send.ErrNoReceipt at the deadline", receiptID(r), err)
				}
			case err != nil || r.ReceiptID != tc.want || r.Delivery.StreamSeq != sent.StreamSeq:
				t.Fatalf("got %s, %v; want %s", receiptID(r), err, tc.want)
			}
		})
	}
}

// An executor stores receipts in atomic batches; the subscription sees a
// batch's receipts as they are published, before the commit stores them. A
// receipt of a batch not yet committed is not reported; once the batch
// commits, it is.
func TestAReceiptInABatchIsReportedOnlyOnceTheBatchIsStored(t *testing.T) {
	env := testenv.Start(t)
	intent := "intent-batch"
	sent := publish(t, env.JS, intent)
	w := watch(t, env.JS, intent)
	stageUncommitted(t, env, w, intent, sent.StreamSeq, "batch-1", "r-batched")

	ack := commitBatch(t, env, intent, sent.StreamSeq, "batch-1")
	var answer struct {
		Error *jetstream.APIError `json:"error"`
		Count int                 `json:"count"`
	}
	if err := json.Unmarshal(ack.Data, &answer); err != nil || answer.Error != nil || answer.Count != 2 {
		t.Fatalf("the commit's answer %s: %v", ack.Data, err)
	}
	wantReceipt(t, w, intent, sent.StreamSeq, 10*time.Second, "r-batched", "after the commit")
}

// A receipt stored while the connection is away (the subscription with it)
// is found once it is back.
func TestAReceiptStoredWhileTheConnectionIsAwayIsFound(t *testing.T) {
	env := testenv.Start(t)
	nc, js := testenv.Connect(t, env.URL(), nats.ReconnectWait(100*time.Millisecond), nats.MaxReconnects(-1))
	intent := "intent-reconnect"
	sent := publish(t, js, intent)
	w := watch(t, js, intent)
	gone := make(chan struct{})
	var once sync.Once
	nc.SetDisconnectErrHandler(func(*nats.Conn, error) { once.Do(func() { close(gone) }) })
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Stack.Server.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	<-gone
	store(t, env.JS, receiptMsg(intent, sent.StreamSeq, receiptDoc(t, intent, sent.StreamSeq, "r-away")))
	wantReceipt(t, w, intent, sent.StreamSeq, 20*time.Second, "r-away", "after the reconnect")
}

// One watch waits for the receipts of many messages of many intents, as
// redrive does, and creates no consumer.
func TestOneWatchWaitsForManyMessagesWithoutAConsumer(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	cand := scenario.Candidate()
	w := send.NewReceiptWatch(env.JS)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sends []send.Sent
	for n := 1; n <= 50; n++ {
		a, err := scenario.Generate(cand, "watch", n)
		if err != nil {
			t.Fatal(err)
		}
		intent := document.Identify(a.Envelope()).IntentID
		if err := w.Watch("", intent); err != nil {
			t.Fatal(err)
		}
		sent, err := send.PublishKey(ctx, env.JS, "", intent, a.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, sent)
	}
	for _, sent := range sends {
		r, err := w.Wait(ctx, sent.Scope, sent.IntentID, sent.StreamSeq)
		if err != nil || r.Outcome != document.OutcomeCreated || r.Delivery.StreamSeq != sent.StreamSeq {
			t.Fatalf("message %d: %v, %v; want created", sent.StreamSeq, r, err)
		}
	}
	s, err := env.JS.Stream(ctx, topology.ReceiptsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Consumers != 0 {
		t.Fatalf("RECEIPTS: %+v, %v; want no consumer", info.State, err)
	}
}

// A publisher whose credentials allow no message get waits for a receipt
// that it saw published in a batch not yet committed, while the last stored
// receipt of its key names an earlier message: the receipt is not stored
// yet, so the wait reads again instead of scanning, and the server refuses
// the publisher nothing; once the batch is committed the receipt is found.
func TestAReceiptSeenBeforeItsBatchIsStoredCostsAPublisherNoRefusal(t *testing.T) {
	env := testenv.StartNoConsumers(t)
	js, violations := env.ConnectPublisher()
	intent := "intent-uncommitted"
	first := publish(t, js, intent)
	second := publish(t, js, intent)
	store(t, env.JS, receiptMsg(intent, first.StreamSeq, receiptDoc(t, intent, first.StreamSeq, "r-first")))
	w := watch(t, js, intent)
	// The staged receipt comes from another connection, so nothing orders
	// it after the watch's subscription: a round trip on the publisher's
	// connection makes sure the server has the subscription first.
	if err := js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	stageUncommitted(t, env, w, intent, second.StreamSeq, "batch-uncommitted", "r-second")
	if v := violations.Seen(); len(v) > 0 {
		t.Fatalf("the server refused the publisher while its receipt was not stored yet: %v", v)
	}
	commitBatch(t, env, intent, second.StreamSeq, "batch-uncommitted")
	wantReceipt(t, w, intent, second.StreamSeq, 10*time.Second, "r-second", "after the commit")
	if v := violations.Seen(); len(v) > 0 {
		t.Errorf("the server refused the publisher: %v", v)
	}
}
