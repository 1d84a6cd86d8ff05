package executor_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/storedmsg"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
	"github.com/sendtwice/sendtwice/taskservice"
)

const spanProcess = "process " + topology.ApprovalsStream

// publishTraced publishes envelope with the trace context of a publish
// span it starts (as a sender does) and returns that span's context and
// the message's stream sequence.
func publishTraced(t *testing.T, env *testenv.Env, envelope []byte, msgID string) (trace.SpanContext, uint64) {
	t.Helper()
	ctx, span := tracing.Tracer().Start(context.Background(), "send", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	m := nats.NewMsg(subjects.Approval("", document.Identify(envelope).IntentID))
	m.Data = envelope
	if !tracing.Inject(ctx, m.Header) {
		t.Fatal("the publish span does not record")
	}
	return span.SpanContext(), publishMsg(t, env, m, msgID)
}

func publishMsg(t *testing.T, env *testenv.Env, m *nats.Msg, msgID string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Header.Set(nats.MsgIdHdr, msgID)
	ack, err := env.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// receiptMsg waits for the terminal receipt of message seq of intent and
// returns it decoded, with its headers.
func receiptMsg(t *testing.T, env *testenv.Env, intent string, seq uint64) (*document.Receipt, nats.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get, from := storedmsg.NewGetter(env.JS, topology.ReceiptsStream), storedmsg.From{Seq: 1}
	for {
		m, err := get.Next(ctx, subjects.Receipt("", intent), from)
		if err != nil {
			t.Fatalf("no receipt for message %d of %s: %v", seq, intent, err)
		}
		if m == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		from = storedmsg.From{Seq: m.Sequence + 1}
		if ended, ok := storedmsg.Ends(m.Header); ok && ended == seq {
			r, err := document.DecodeReceipt(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			return r, m.Header
		}
	}
}

// deliveriesOf waits until n consumer spans of trace id have ended, and
// returns every ended span of the trace.
func deliveriesOf(t *testing.T, rec *tracetest.SpanRecorder, id trace.TraceID, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		spans := slices.DeleteFunc(rec.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().TraceID() != id })
		if len(named(spans, spanProcess)) >= n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans of trace %s, %d of them %q; want %d", len(spans), id, len(named(spans, spanProcess)), spanProcess, n)
		}
	}
}

// named returns the spans named name, in the order they ended.
func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	return slices.DeleteFunc(slices.Clone(spans), func(s sdktrace.ReadOnlySpan) bool { return s.Name() != name })
}

// childrenOf names the spans whose parent is span, in the order they ended.
func childrenOf(spans []sdktrace.ReadOnlySpan, span sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		if s.Parent().SpanID() == span.SpanContext().SpanID() {
			out = append(out, s.Name())
		}
	}
	return out
}

// wantAttrs checks that span s carries each of want.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	got := tracingtest.Attributes(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %s: %s = %q, want %q (all: %v)", s.Name(), k, got[k], v, got)
		}
	}
}

// logged reports whether one line of log contains each of parts.
func logged(log string, parts ...string) bool {
	return slices.ContainsFunc(strings.Split(log, "\n"), func(line string) bool {
		return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) })
	})
}

// oneDelivery checks that the trace of publish holds one consumer span,
// a child of the publish span linked to it, and returns it.
func oneDelivery(t *testing.T, spans []sdktrace.ReadOnlySpan, publish trace.SpanContext) sdktrace.ReadOnlySpan {
	t.Helper()
	process := named(spans, spanProcess)
	if len(process) != 1 {
		t.Fatalf("%d consumer spans in the trace, want 1", len(process))
	}
	p := process[0]
	if p.SpanKind() != trace.SpanKindConsumer || p.Parent().SpanID() != publish.SpanID() {
		t.Errorf("consumer span of kind %v with parent %s; want a consumer span whose parent is the publish span %s",
			p.SpanKind(), p.Parent().SpanID(), publish.SpanID())
	}
	if l := p.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != publish.SpanID() {
		t.Errorf("consumer span links %+v; want one link to the publish span", l)
	}
	return p
}

// A traced approval is handled in one consumer span of its trace, with the
// gate, the service call (whose context the service is handed), the
// receipt's store and the ack as children; its receipt names the trace and
// carries the consumer span's context, and its log lines the trace's ids.
// The same approval sent again is answered in its own trace as replayed.
func TestATracedApprovalIsOneConsumerSpanOfItsTraceCreatedThenReplayed(t *testing.T) {
	rec := tracingtest.Record(t)
	env := testenv.Start(t)
	client := provider.NewClient(env.NC)
	client.Timeout = time.Second
	called := make(chan trace.SpanContext, 4)
	svc := taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		called <- trace.SpanContextFromContext(ctx)
		return client.TaskService().Create(ctx, req)
	})
	var log testenv.Buffer
	env.Executor(executor.Config{ID: "exec-traced", TaskService: svc,
		Logger: slog.New(tracing.LogHandler(slog.NewTextHandler(&log, nil)))})
	envelope := testenv.Seed(t).Original.Envelope()
	var taskID string
	for i, outcome := range []string{document.OutcomeCreated, document.OutcomeReplayed} {
		msgID := fmt.Sprint("send-", i)
		publish, seq := publishTraced(t, env, envelope, msgID)
		r, h := receiptMsg(t, env, "intent-0001", seq)
		spans := deliveriesOf(t, rec, publish.TraceID(), 1)
		p := oneDelivery(t, spans, publish)
		if r.Outcome != outcome || r.TaskID == nil {
			t.Fatalf("send %d: receipt %s, want %s with a task", i+1, r.Outcome, outcome)
		}
		taskID = *r.TaskID
		wantAttrs(t, p, map[attribute.Key]string{
			tracing.MessagingSystem: "nats", tracing.MessagingDestination: subjects.Approval("", "intent-0001"),
			tracing.MessagingOperation: "process", tracing.MessagingMessageID: msgID,
			tracing.MessagingDeliveryCount: "1", tracing.MessagingStreamSequence: fmt.Sprint(seq),
			tracing.IntentID: "intent-0001", tracing.Scope: document.DefaultScope, tracing.Destination: document.DefaultDestination,
			tracing.Executor: "exec-traced", tracing.Outcome: outcome, tracing.TaskID: taskID,
		})
		if got, want := childrenOf(spans, p), []string{"gate", "task service create", "receipt store", "ack"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("send %d: the consumer span's children %v, want %v", i+1, got, want)
		}
		create := named(spans, "task service create")[0]
		if sc := <-called; !sc.Equal(create.SpanContext()) {
			t.Errorf("send %d: the service was handed span context %v, want the create span's %v", i+1, sc, create.SpanContext())
		}
		if r.TraceID != publish.TraceID().String() {
			t.Errorf("send %d: receipt trace_id %q, want the trace's %s", i+1, r.TraceID, publish.TraceID())
		}
		if want := "00-" + publish.TraceID().String() + "-" + p.SpanContext().SpanID().String() + "-01"; h.Get("traceparent") != want {
			t.Errorf("send %d: receipt traceparent %q, want the consumer span's %s", i+1, h.Get("traceparent"), want)
		}
		if want := "trace_id=" + publish.TraceID().String() + " span_id=" + p.SpanContext().SpanID().String(); !logged(log.String(), "msg=receipt", "outcome="+outcome, want) {
			t.Errorf("send %d: no receipt line carrying %s in the log:\n%s", i+1, want, log.String())
		}
	}
}

// A message the gate refuses has a failed gate span naming the refusing
// check, a consumer span saying rejected with that check, and no call.
func TestATamperedApprovalsTraceNamesTheCheckThatRefusedIt(t *testing.T) {
	rec := tracingtest.Record(t)
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-traced"})
	for i, c := range testenv.Seed(t).TamperedCases() {
		t.Run(c.Name+" is refused at "+c.Check+" in its trace", func(t *testing.T) {
			publish, seq := publishTraced(t, env, c.Envelope, fmt.Sprint("tampered-", i))
			r, _ := receiptMsg(t, env, document.Identify(c.Envelope).IntentID, seq)
			spans := deliveriesOf(t, rec, publish.TraceID(), 1)
			p := oneDelivery(t, spans, publish)
			if r.Outcome != document.OutcomeRejected || r.TraceID != publish.TraceID().String() {
				t.Fatalf("receipt %s with trace_id %q, want rejected in trace %s", r.Outcome, r.TraceID, publish.TraceID())
			}
			wantAttrs(t, p, map[attribute.Key]string{tracing.Outcome: document.OutcomeRejected, tracing.Check: c.Check})
			if got := childrenOf(spans, p); strings.Join(got, ",") != "gate,receipt store,ack" {
				t.Errorf("the consumer span's children %v, want gate, receipt store, ack", got)
			}
			gate := named(spans, "gate")[0]
			if gate.Status().Code != codes.Error || tracingtest.Attributes(gate)[tracing.Check] != c.Check {
				t.Errorf("gate span status %v, check %q; want an error naming %s", gate.Status(), tracingtest.Attributes(gate)[tracing.Check], c.Check)
			}
		})
	}
}

// A delivery whose reply the service withholds is given back; the
// redelivery finds the task and says replayed. The trace of the one send
// holds both deliveries: the first failed with outcome retry, the second
// looking for a stored receipt before it is answered.
func TestALostReplysTraceHoldsBothDeliveries(t *testing.T) {
	rec := tracingtest.Record(t)
	env := testenv.Start(t)
	var log testenv.Buffer
	env.Executor(executor.Config{ID: "exec-traced", Logger: slog.New(tracing.LogHandler(slog.NewTextHandler(&log, nil)))})
	if _, err := env.Service.ArmFault(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	publish, seq := publishTraced(t, env, testenv.Seed(t).Original.Envelope(), "lost-reply")
	r, _ := receiptMsg(t, env, "intent-0001", seq)
	if r.Outcome != document.OutcomeReplayed || r.Delivery.Delivered != 2 || r.TraceID != publish.TraceID().String() {
		t.Fatalf("receipt %s on delivery %d in trace %q; want replayed on delivery 2 in trace %s",
			r.Outcome, r.Delivery.Delivered, r.TraceID, publish.TraceID())
	}
	spans := deliveriesOf(t, rec, publish.TraceID(), 2)
	process := named(spans, spanProcess)
	if len(process) != 2 {
		t.Fatalf("%d consumer spans, want 2", len(process))
	}
	first, second := process[0], process[1]
	for _, p := range process {
		if p.Parent().SpanID() != publish.SpanID() {
			t.Errorf("a delivery's span has parent %s, want the publish span %s", p.Parent().SpanID(), publish.SpanID())
		}
	}
	wantAttrs(t, first, map[attribute.Key]string{tracing.MessagingDeliveryCount: "1", tracing.Outcome: executor.OutcomeRetry})
	if first.Status().Code != codes.Error {
		t.Errorf("the first delivery's span has status %v, want the call's error", first.Status())
	}
	if got := childrenOf(spans, first); strings.Join(got, ",") != "gate,task service create" {
		t.Errorf("the first delivery's children %v, want gate, task service create", got)
	}
	wantAttrs(t, second, map[attribute.Key]string{tracing.MessagingDeliveryCount: "2", tracing.Outcome: document.OutcomeReplayed})
	if got := childrenOf(spans, second); strings.Join(got, ",") != "receipt lookup,gate,task service create,receipt store,ack" {
		t.Errorf("the second delivery's children %v, want receipt lookup, gate, task service create, receipt store, ack", got)
	}
	if want := "trace_id=" + publish.TraceID().String() + " span_id=" + first.SpanContext().SpanID().String(); !logged(log.String(), "will retry", "delivered=1", want) {
		t.Errorf("no retry line carrying the first delivery's %s in the log:\n%s", want, log.String())
	}
}

// An approval that carries no trace context is traced from the executor
// on: its consumer span starts a trace, which its receipt names.
func TestAnUntracedApprovalStartsItsTraceAtTheExecutor(t *testing.T) {
	rec := tracingtest.Record(t)
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-traced"})
	m := nats.NewMsg(subjects.Approval("", "intent-0001"))
	m.Data = testenv.Seed(t).Original.Envelope()
	seq := publishMsg(t, env, m, "untraced")
	r, h := receiptMsg(t, env, "intent-0001", seq)
	id, err := trace.TraceIDFromHex(r.TraceID)
	if err != nil {
		t.Fatalf("receipt trace_id %q: %v", r.TraceID, err)
	}
	p := named(deliveriesOf(t, rec, id, 1), spanProcess)[0]
	if p.Parent().IsValid() || len(p.Links()) != 0 {
		t.Errorf("consumer span with parent %v and links %v; want a root span without links", p.Parent(), p.Links())
	}
	if !strings.Contains(h.Get("traceparent"), p.SpanContext().SpanID().String()) {
		t.Errorf("receipt traceparent %q; want the consumer span's", h.Get("traceparent"))
	}
}

// With tracing off (no tracer provider or propagator set, or the no-op
// ones tracingtest leaves), a receipt names no trace and its message
// carries no trace context, even for an approval published with one.
func TestWithTracingOffAReceiptNamesNoTrace(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-untraced"})
	envelope := testenv.Seed(t).Original.Envelope()
	for i, parent := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		m := nats.NewMsg(subjects.Approval("", "intent-0001"))
		m.Data = envelope
		if parent != "" {
			m.Header.Set("traceparent", parent)
		}
		seq := publishMsg(t, env, m, fmt.Sprint("off-", i))
		r, h := receiptMsg(t, env, "intent-0001", seq)
		if r.TraceID != "" || h.Get("traceparent") != "" || h.Get("tracestate") != "" {
			t.Errorf("approval with traceparent %q: receipt trace_id %q, headers %v; want neither", parent, r.TraceID, h)
		}
	}
}
