package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/internal/tracing/tracingtest"
)

// childOf returns the one span of spans whose parent is parent.
func childOf(t *testing.T, spans []sdktrace.ReadOnlySpan, parent trace.SpanContext) sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().TraceID() == parent.TraceID() {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d spans of %d are children of span %s, want 1", len(out), len(spans), parent.SpanID())
	}
	return out[0]
}

func TestACreateIsOneTraceFromTheCallerToTheCommit(t *testing.T) {
	rec := tracingtest.Record(t)
	h := newHarness(t, Options{}, ServiceConfig{})
	req := newRequest("intent-traced", "Review the contract")
	for i, want := range []string{OutcomeCreated, OutcomeReplayed} {
		ctx, caller := tracing.Tracer().Start(ctxT(t), "caller")
		resp, err := h.client.Create(ctx, req)
		caller.End()
		if err != nil || resp.Outcome != want {
			t.Fatalf("call %d: %+v, %v; want %s", i+1, resp, err, want)
		}
		request := childOf(t, tracingtest.Wait(t, rec, "request "+SubjectCreate, i+1), caller.SpanContext())
		server := childOf(t, tracingtest.Wait(t, rec, "provider create", i+1), request.SpanContext())
		commit := childOf(t, tracingtest.Wait(t, rec, "commit", i+1), server.SpanContext())
		for _, s := range []sdktrace.ReadOnlySpan{request, server, commit} {
			if s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
				t.Fatalf("call %d: span %q is in trace %s, want the caller's %s", i+1, s.Name(), s.SpanContext().TraceID(), caller.SpanContext().TraceID())
			}
			if desc, failed := tracingtest.Failed(s); failed {
				t.Errorf("call %d: span %q failed: %s", i+1, s.Name(), desc)
			}
		}
		if request.SpanKind() != trace.SpanKindClient || server.SpanKind() != trace.SpanKindServer || !server.Parent().IsRemote() {
			t.Errorf("call %d: kinds %v, %v (remote parent %v); want client, then server under a remote parent",
				i+1, request.SpanKind(), server.SpanKind(), server.Parent().IsRemote())
		}
		if err := errors.Join(tracingtest.Check(request, tracing.NATS, tracing.MessagingDestination.String(SubjectCreate)),
			tracingtest.Check(server, tracing.IntentID.String("intent-traced"), tracing.Scope.String(DefaultScope),
				tracing.Outcome.String(want), tracing.TaskID.String(resp.TaskID))); err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
		if commit.StartTime().Before(server.StartTime()) || commit.EndTime().After(server.EndTime()) {
			t.Errorf("call %d: the commit (%v to %v) is not within the create (%v to %v)", i+1,
				commit.StartTime(), commit.EndTime(), server.StartTime(), server.EndTime())
		}
	}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Value.String() == "Review the contract" {
				t.Errorf("span %q holds the task's title in %s", s.Name(), kv.Key)
			}
		}
	}
}

func TestARefusedCreateIsAnErrorOnBothSidesAndCommitsNothing(t *testing.T) {
	rec := tracingtest.Record(t)
	h := newHarness(t, Options{}, ServiceConfig{})
	ctx, caller := tracing.Tracer().Start(ctxT(t), "caller")
	_, err := h.client.Create(ctx, CreateRequest{IntentID: "intent-bad"})
	caller.End()
	if _, ok := errors.AsType[*ServiceError](err); !ok {
		t.Fatalf("a create without a digest: %v, want a service error", err)
	}
	request := childOf(t, tracingtest.Wait(t, rec, "request "+SubjectCreate, 1), caller.SpanContext())
	server := childOf(t, tracingtest.Wait(t, rec, "provider create", 1), request.SpanContext())
	for _, s := range []sdktrace.ReadOnlySpan{request, server} {
		if desc, failed := tracingtest.Failed(s); !failed || desc == "" {
			t.Errorf("span %q: status %q (failed %v), want an error", s.Name(), desc, failed)
		}
	}
	if n := len(tracingtest.Named(rec, "commit")); n != 0 {
		t.Errorf("%d commit spans for a call that was never written", n)
	}
}

// createSeen makes one create through the harness's client and returns
// the request as the service received it: a plain subscriber on the create
// subject gets its own copy.
func createSeen(t *testing.T) *nats.Msg {
	t.Helper()
	h := newHarness(t, Options{}, ServiceConfig{})
	sub, err := h.nc.SubscribeSync(SubjectCreate)
	if err == nil {
		err = h.nc.Flush()
	}
	if err == nil {
		_, err = h.client.Create(ctxT(t), newRequest("intent-seen", "x"))
	}
	if err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestTheRequestCarriesATraceContextOnlyWhenTraced(t *testing.T) {
	t.Run("with tracing off the request has no header", func(t *testing.T) {
		if msg := createSeen(t); msg.Header != nil {
			t.Fatalf("untraced request has header %v", msg.Header)
		}
	})
	t.Run("with tracing on the request carries the client span's traceparent", func(t *testing.T) {
		rec := tracingtest.Record(t)
		msg := createSeen(t)
		request := tracingtest.Wait(t, rec, "request "+SubjectCreate, 1)[0].SpanContext()
		got := trace.SpanContextFromContext(tracing.Extract(context.Background(), msg.Header))
		if got.SpanID() != request.SpanID() || got.TraceID() != request.TraceID() {
			t.Fatalf("request header %v carries %s/%s, want the client span %s/%s", msg.Header,
				got.TraceID(), got.SpanID(), request.TraceID(), request.SpanID())
		}
	})
}

// With tracing off, a create's trace (its span, its commit's, their ends
// with an outcome) allocates nothing; the client's span is behind the same
// tracing.On.
func TestAnUntracedCreateAllocatesNothingForTracing(t *testing.T) {
	if tracing.On() {
		t.Fatal("tracing is on at the start of the test")
	}
	resp := CreateResponse{Outcome: OutcomeCreated, TaskID: "task-1"}
	allocs := testing.AllocsPerRun(200, func() {
		tr := startCreateTrace(nil)
		tr.called(CreateRequest{IntentID: "intent-1", Scope: DefaultScope})
		tr.committing()
		tr.committed(nil)
		tr.end(resp, nil)
		if tr.context() == nil {
			t.Fatal("no context")
		}
	})
	if allocs != 0 {
		t.Fatalf("an untraced create's spans allocate %v times, want 0", allocs)
	}
}
