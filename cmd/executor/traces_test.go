package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/jaegertest"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The services the programs name themselves (cli.Main), and the span names
// of the tracing contract (docs/TRACING.md).
const (
	publisherService = "sendtwice-publisher"
	executorService  = "sendtwice-executor"
	providerService  = "sendtwice-provider"
	processSpan      = "process " + topology.ApprovalsStream
)

// tracedPipeline is the pipeline as separate OS processes, each exporting
// its spans to a real Jaeger: the fake task service (this test binary in
// the role service, with its fault switch), one executor (executor serve)
// and a publisher process per send (publisher send). The NATS server runs
// in the test's process: it makes no spans.
type tracedPipeline struct {
	jaeger *jaegertest.Jaeger
	url    string
	js     jetstream.JetStream
	svc    *provider.Client
}

// startTracedPipeline starts Jaeger and the pipeline; the executor takes
// executorArgs besides the tests' usual flags. OTEL_EXPORTER_OTLP_ENDPOINT
// (and a short export delay) is set in the test's environment, which every
// process it starts inherits.
func startTracedPipeline(t *testing.T, executorArgs ...string) *tracedPipeline {
	t.Helper()
	j := jaegertest.Start(t)
	for _, kv := range j.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	p := &tracedPipeline{jaeger: j, url: testenv.NATS(t)}
	nc, js := testenv.Connect(t, p.url)
	p.js, p.svc = js, provider.NewClient(nc)
	startTracedRole(t, "the task service", roleCmd("service", t.TempDir(), p.url, 0))
	waitFor(t, 30*time.Second, "the task service to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := p.svc.Info(ctx)
		return err == nil
	})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startExecutor(t, p.url, "exec-traced", append([]string{"--http", addr}, executorArgs...)...)
	waitFor(t, 30*time.Second, "the executor to be ready", func() bool { return ready(addr) })
	return p
}

// startTracedRole starts cmd, a role of this test binary (named name in a
// failure's message), and stops it with SIGTERM (it then flushes its
// spans) when the test ends.
func startTracedRole(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil || t.Failed() {
			t.Logf("%s ended with %v; its output:\n%s", name, err, out.String())
		}
	})
}

// sendResult is what one publisher send left: its output and exit status, the
// trace id it printed, and the receipt stored for it with its trace_id and
// traceparent header.
type sendResult struct {
	output      string
	exit        int
	printed     string
	receipt     map[string]any
	traceparent string
}

// traceID is the trace the send's receipt names.
func (s sendResult) traceID() string {
	id, _ := s.receipt["trace_id"].(string)
	return id
}

// printedTraceID finds a trace id (32 hex digits after the word trace)
// in what publisher send printed.
var printedTraceID = regexp.MustCompile(`(?i)trace\S*?\W+([0-9a-f]{32})\b`)

// send publishes envelope from a publisher process (this test binary as
// publisher send, extra its further flags) and waits for its receipt.
func (p *tracedPipeline) send(t *testing.T, envelope []byte, extra ...string) sendResult {
	t.Helper()
	file := writeTestFile(t, "envelope.json", string(envelope))
	cmd := exec.Command(os.Args[0], append([]string{"--server", p.url, "--envelope", file, "--wait", "30s"}, extra...)...)
	cmd.Env = append(senderEnv(os.Environ()), asMain+"=1", demoSenderEnv+"=1")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("publisher send: %v", err)
	}
	s := sendResult{output: string(out), exit: cmd.ProcessState.ExitCode()}
	if m := printedTraceID.FindStringSubmatch(s.output); m != nil {
		s.printed = m[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := document.Identify(envelope)
	stream, err := p.js.Stream(ctx, topology.ReceiptsStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subjects.Receipt(id.Scope, id.IntentID))
	if err != nil {
		t.Fatalf("the receipt of intent %s: %v; publisher send printed:\n%s", id.IntentID, err, out)
	}
	if err := json.Unmarshal(msg.Data, &s.receipt); err != nil {
		t.Fatal(err)
	}
	s.traceparent = msg.Header.Get("traceparent")
	return s
}

// expectNamedTrace checks that the receipt, its traceparent header and
// publisher send's output all name one trace, and returns its id.
func expectNamedTrace(t *testing.T, s sendResult) string {
	t.Helper()
	id := s.traceID()
	if len(id) != 32 {
		t.Fatalf("the receipt's trace_id is %q, want 32 hex digits; the receipt: %v", id, s.receipt)
	}
	if s.printed != id {
		t.Errorf("publisher send printed the trace id %q, the receipt names %s; it printed:\n%s", s.printed, id, s.output)
	}
	if !strings.HasPrefix(s.traceparent, "00-"+id+"-") {
		t.Errorf("the receipt's traceparent header %q names another trace than its trace_id %s", s.traceparent, id)
	}
	return id
}

// onlySpan returns the only span named name that service made in tr, failing
// the test unless there is exactly one.
func onlySpan(t *testing.T, tr jaegertest.Trace, service, name string) jaegertest.Span {
	t.Helper()
	var found []jaegertest.Span
	for _, s := range tr.Named(name) {
		if tr.Service(s) == service {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q of %s, want 1; the %s", len(found), name, service, tr)
	}
	return found[0]
}

// publisherSpan is the publisher's send span, whatever the subject it names.
func publisherSpan(t *testing.T, tr jaegertest.Trace) jaegertest.Span {
	t.Helper()
	for _, s := range tr.Spans {
		if strings.HasPrefix(s.OperationName, "send ") && tr.Service(s) == publisherService {
			return s
		}
	}
	t.Fatalf("no span send <subject> of %s; the %s", publisherService, tr)
	return jaegertest.Span{}
}

// expectSpanTags checks tags of s.
func expectSpanTags(t *testing.T, what string, s jaegertest.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Tag(k); got != v {
			t.Errorf("%s: tag %s is %q (present: %v), want %q", what, k, got, ok, v)
		}
	}
}

// inThisOrder reports whether want are among got, in this order.
func inThisOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// holdsDeliveries reports whether tr holds n process spans with an
// outcome: the executor has finished n deliveries.
func holdsDeliveries(n int) func(jaegertest.Trace) bool {
	return func(tr jaegertest.Trace) bool {
		done := 0
		for _, s := range tr.Named(processSpan) {
			if _, ok := s.Tag("sendtwice.outcome"); ok {
				done++
			}
		}
		return done >= n
	}
}

// holdsSpans reports whether tr holds a span of each name.
func holdsSpans(names ...string) func(jaegertest.Trace) bool {
	return func(tr jaegertest.Trace) bool {
		return !slices.ContainsFunc(names, func(n string) bool { return len(tr.Named(n)) == 0 })
	}
}

// allHold reports whether both a and b hold for a trace.
func allHold(a, b func(jaegertest.Trace) bool) func(jaegertest.Trace) bool {
	return func(tr jaegertest.Trace) bool { return a(tr) && b(tr) }
}

// expectDelivery checks the executor's span of one delivery under the
// publisher's send span: its kind, parent, link and attributes.
func expectDelivery(t *testing.T, tr jaegertest.Trace, process, send jaegertest.Span, intent, outcome string, delivery int) {
	t.Helper()
	if process.Parent() != send.SpanID {
		t.Errorf("the parent of %s is %q, want the send span %s; the %s", processSpan, process.Parent(), send.SpanID, tr)
	}
	if !slices.Contains(process.References, jaegertest.Reference{RefType: jaegertest.FollowsFrom, TraceID: tr.TraceID, SpanID: send.SpanID}) {
		t.Errorf("%s has no link to the send span: references %+v", processSpan, process.References)
	}
	expectSpanTags(t, processSpan, process, map[string]string{
		"span.kind": "consumer", "messaging.system": "nats", "messaging.operation.type": "process",
		"sendtwice.intent_id": intent, "sendtwice.outcome": outcome,
		"messaging.nats.message.delivery_count": fmt.Sprint(delivery),
	})
	for _, key := range []string{"messaging.destination.name", "messaging.message.id", "messaging.nats.stream.sequence", "sendtwice.scope", "sendtwice.executor"} {
		if _, ok := process.Tag(key); !ok {
			t.Errorf("%s lacks the tag %s", processSpan, key)
		}
	}
}

func TestASendIsOneTraceAcrossPublisherExecutorAndTaskService(t *testing.T) {
	p := startTracedPipeline(t)
	s := testenv.Seed(t)
	intent := document.Identify(s.Original.Envelope()).IntentID

	first := p.send(t, s.Original.Envelope())
	if first.exit != 0 || first.receipt["outcome"] != document.OutcomeCreated {
		t.Fatalf("the first send: exit %d, receipt %v:\n%s", first.exit, first.receipt, first.output)
	}
	id := expectNamedTrace(t, first)
	tr := p.jaeger.WaitTrace(t, id, allHold(holdsDeliveries(1), holdsSpans("provider create", "commit", "ack")))

	if got, want := tr.Services(), sortedOf(publisherService, executorService, providerService); !slices.Equal(got, want) {
		t.Errorf("the trace's services %q, want %q", got, want)
	}
	send := publisherSpan(t, tr)
	expectSpanTags(t, "the send span", send, map[string]string{"span.kind": "producer", "messaging.system": "nats",
		"messaging.operation.type": "send", "sendtwice.intent_id": intent})
	if send.Parent() != "" {
		t.Errorf("the send span has a parent %s: publisher send starts the trace", send.Parent())
	}
	process := onlySpan(t, tr, executorService, processSpan)
	expectDelivery(t, tr, process, send, intent, document.OutcomeCreated, 1)
	if task, _ := process.Tag("sendtwice.task_id"); task == "" || task != first.receipt["task_id"] {
		t.Errorf("%s names the task %q, the receipt %v", processSpan, task, first.receipt["task_id"])
	}
	children := jaegertest.Operations(tr.Children(process))
	if want := []string{"gate", "task service create", "receipt store", "ack"}; !inThisOrder(children, want) {
		t.Errorf("the children of %s are %q, want %q among them in this order", processSpan, children, want)
	}
	create := onlySpan(t, tr, providerService, "provider create")
	expectSpanTags(t, "provider create", create, map[string]string{"span.kind": "server", "sendtwice.intent_id": intent,
		"sendtwice.outcome": document.OutcomeCreated})
	if !tr.Within(create, onlySpan(t, tr, executorService, "task service create")) {
		t.Errorf("provider create is not within the executor's task service create; the %s", tr)
	}
	if got := jaegertest.Operations(tr.Children(create)); !slices.Contains(got, "commit") {
		t.Errorf("the children of provider create are %q, want commit among them", got)
	}

	again := p.send(t, s.Original.Envelope())
	if again.exit != 0 || again.receipt["outcome"] != document.OutcomeReplayed {
		t.Fatalf("the resend: exit %d, receipt %v:\n%s", again.exit, again.receipt, again.output)
	}
	resendID := expectNamedTrace(t, again)
	if resendID == id {
		t.Fatalf("the resend is in the first send's trace %s: every send is a trace of its own", id)
	}
	resend := p.jaeger.WaitTrace(t, resendID, holdsDeliveries(1))
	expectDelivery(t, resend, onlySpan(t, resend, executorService, processSpan), publisherSpan(t, resend), intent, document.OutcomeReplayed, 1)

	// Each send is one trace: the search by intent finds exactly these two.
	traces := p.jaeger.WaitTraces(t, executorService, map[string]string{"sendtwice.intent_id": intent}, nil)
	var ids []string
	for _, tr := range traces {
		ids = append(ids, tr.TraceID)
	}
	if slices.Sort(ids); !slices.Equal(ids, sortedOf(id, resendID)) {
		t.Errorf("the executor's traces of intent %s are %q, want the two sends' %q", intent, ids, sortedOf(id, resendID))
	}
	expectNothingSecret(t, tr, resend)
}

func sortedOf(ids ...string) []string { slices.Sort(ids); return ids }

// expectNothingSecret checks that no tag of the traces holds the
// request's title or assignee, a password or a URL's query.
func expectNothingSecret(t *testing.T, traces ...jaegertest.Trace) {
	t.Helper()
	for _, tr := range traces {
		for _, s := range tr.Spans {
			for _, kv := range s.Tags {
				v := fmt.Sprint(kv.Value)
				for _, secret := range []string{scenario.Title, caldavTracesPassword} {
					if strings.Contains(v, secret) {
						t.Errorf("the span %s of %s carries %q in its tag %s", s.OperationName, tr.Service(s), secret, kv.Key)
					}
				}
				if strings.HasPrefix(kv.Key, "url.") && strings.Contains(v, "?") {
					t.Errorf("the span %s carries a URL with its query: %s=%s", s.OperationName, kv.Key, v)
				}
			}
		}
	}
}

func TestATamperedMessagesTraceNamesTheCheckThatRefusedIt(t *testing.T) {
	p := startTracedPipeline(t)
	s := testenv.Seed(t)
	i := slices.IndexFunc(s.TamperedCases(), func(c scenario.Tampered) bool { return c.Name == "request-edited-after-approval" })
	tampered := s.TamperedCases()[i]

	refused := p.send(t, tampered.Envelope, "--no-check")
	if refused.receipt["outcome"] != document.OutcomeRejected {
		t.Fatalf("the tampered message's receipt %v, want rejected:\n%s", refused.receipt, refused.output)
	}
	tr := p.jaeger.WaitTrace(t, expectNamedTrace(t, refused), allHold(holdsDeliveries(1), holdsSpans("gate")))
	process := onlySpan(t, tr, executorService, processSpan)
	expectDelivery(t, tr, process, publisherSpan(t, tr), document.Identify(tampered.Envelope).IntentID, document.OutcomeRejected, 1)
	expectSpanTags(t, processSpan, process, map[string]string{"sendtwice.gate.check": tampered.Check})
	gate := onlySpan(t, tr, executorService, "gate")
	if gate.Parent() != process.SpanID {
		t.Errorf("the gate span's parent is %s, want %s", gate.Parent(), processSpan)
	}
	expectSpanTags(t, "the gate span", gate, map[string]string{"sendtwice.gate.check": tampered.Check, "otel.status_code": "ERROR"})
	for _, never := range []string{"task service create", "provider create"} {
		if n := len(tr.Named(never)); n != 0 {
			t.Errorf("the refused message's trace holds %d spans %s: the task service heard of it", n, never)
		}
	}
	if slices.Contains(tr.Services(), providerService) {
		t.Errorf("the refused message's trace has spans of %s", providerService)
	}
}

func TestALostReplysTraceHoldsBothDeliveriesTheSecondReplayed(t *testing.T) {
	p := startTracedPipeline(t)
	s := testenv.Seed(t)
	intent := document.Identify(s.Original.Envelope()).IntentID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.svc.ArmFault(ctx, 1); err != nil {
		t.Fatal(err)
	}

	lost := p.send(t, s.Original.Envelope())
	if lost.exit != 0 || lost.receipt["outcome"] != document.OutcomeReplayed {
		t.Fatalf("the send whose first reply was lost: exit %d, receipt %v, want replayed:\n%s", lost.exit, lost.receipt, lost.output)
	}
	tr := p.jaeger.WaitTrace(t, expectNamedTrace(t, lost), allHold(holdsDeliveries(2), holdsSpans("provider create")))
	deliveries := tr.Named(processSpan)
	if len(deliveries) != 2 {
		t.Fatalf("%d deliveries in the trace, want 2; the %s", len(deliveries), tr)
	}
	send := publisherSpan(t, tr)
	expectDelivery(t, tr, deliveries[0], send, intent, "retry", 1)
	if _, ok := deliveries[0].Tag("otel.status_code"); !ok {
		t.Errorf("the first delivery, given back for retry, has no error status: %+v", deliveries[0].Tags)
	}
	expectDelivery(t, tr, deliveries[1], send, intent, document.OutcomeReplayed, 2)
	var outcomes []string
	for _, c := range tr.Named("provider create") {
		o, _ := c.Tag("sendtwice.outcome")
		outcomes = append(outcomes, o)
	}
	if want := []string{document.OutcomeCreated, document.OutcomeReplayed}; !slices.Equal(outcomes, want) {
		t.Errorf("the service's creates in the trace: %q, want %q (the first reply lost, the second replayed)", outcomes, want)
	}
}

func TestTheDemoLeavesTracesOfEveryOutcomeAcrossTwoServices(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "demo")
	cmd.Env = append(append(os.Environ(), asMain+"=1"), j.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("executor demo with tracing on: %v\n%s", err, out)
	}

	if got := j.WaitServices(t, executorService, publisherService); len(got) != 2 {
		t.Errorf("Jaeger lists the services %q, want %s and %s", got, executorService, publisherService)
	}
	for _, outcome := range []string{document.OutcomeCreated, document.OutcomeReplayed, document.OutcomeConflict, document.OutcomeRejected} {
		traces := j.WaitTraces(t, executorService, map[string]string{"sendtwice.outcome": outcome}, nil)
		for _, tr := range traces {
			for _, sp := range tr.Named(processSpan) {
				if o, _ := sp.Tag("sendtwice.outcome"); o != outcome {
					continue
				}
				if intent, _ := sp.Tag("sendtwice.intent_id"); intent == "" && outcome != document.OutcomeRejected {
					t.Errorf("a %s span with outcome %s names no intent id", processSpan, outcome)
				}
				if check, _ := sp.Tag("sendtwice.gate.check"); (check != "") != (outcome == document.OutcomeRejected) {
					t.Errorf("a %s span with outcome %s names the gate's check %q", processSpan, outcome, check)
				}
			}
		}
	}
	// Steps 1 and 2 come from publisher processes: their traces hold the
	// publisher's send span and the executor's delivery.
	fromPublishers := j.WaitTraces(t, publisherService, nil, func(trs []jaegertest.Trace) bool { return len(trs) >= 2 })
	for _, tr := range fromPublishers {
		if !slices.Contains(tr.Services(), executorService) {
			t.Errorf("a trace of %s holds no span of %s; the %s", publisherService, executorService, tr)
		}
	}
}
