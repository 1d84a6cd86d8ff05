package jaegertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/tracing/otlp"
)

// emit sends a parent span and a child linked to another span to j
// through the programs' own start of tracing (otlp.Start), as the service
// service, and returns the parent's trace id and the linked span context.
func emit(t *testing.T, j *Jaeger, service string) (traceID string, linked trace.SpanContext) {
	t.Helper()
	for _, kv := range j.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	before, beforeProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(before); otel.SetTextMapPropagator(beforeProp) })
	stop, err := otlp.Start(context.Background(), service)
	if err != nil {
		t.Fatal(err)
	}
	tr := otel.Tracer("jaegertest")
	_, other := tr.Start(context.Background(), "other")
	other.End()
	ctx, parent := tr.Start(context.Background(), "probe parent", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("probe.key", "probe-value"), attribute.Int("probe.count", 2)))
	_, child := tr.Start(ctx, "probe child", trace.WithLinks(trace.Link{SpanContext: other.SpanContext()}))
	child.End()
	_, linkedToParent := tr.Start(ctx, "probe consumer", trace.WithLinks(trace.LinkFromContext(ctx)))
	linkedToParent.End()
	parent.End()
	if err := stop(context.Background()); err != nil {
		t.Fatalf("flushing the spans: %v", err)
	}
	return parent.SpanContext().TraceID().String(), other.SpanContext()
}

func TestASpanSentOverOTLPIsFoundThroughTheAPIWithItsParentLinkAndTags(t *testing.T) {
	j := Start(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "probe.resource=r1")
	id, linked := emit(t, j, "jaegertest-probe")

	tr := j.WaitTrace(t, id, func(tr Trace) bool { return len(tr.Spans) == 3 })
	if got := tr.Services(); !slices.Equal(got, []string{"jaegertest-probe"}) {
		t.Errorf("services %q, want jaegertest-probe", got)
	}
	parents, children := tr.Named("probe parent"), tr.Named("probe child")
	if len(parents) != 1 || len(children) != 1 {
		t.Fatalf("the trace holds %q, want one probe parent and one probe child", Operations(tr.Spans))
	}
	parent, child := parents[0], children[0]
	if parent.Parent() != "" || child.Parent() != parent.SpanID {
		t.Errorf("parent of the parent %q, of the child %q; want none and %s", parent.Parent(), child.Parent(), parent.SpanID)
	}
	if got := Operations(tr.Children(parent)); !slices.Equal(got, []string{"probe child", "probe consumer"}) {
		t.Errorf("the parent's children %q", got)
	}
	// Jaeger keeps one reference, FOLLOWS_FROM, to a parent that is
	// also a link; it is still the parent.
	consumer := tr.Named("probe consumer")[0]
	if want := []Reference{{FollowsFrom, id, parent.SpanID}}; !slices.Equal(consumer.References, want) || consumer.Parent() != parent.SpanID {
		t.Errorf("a span linked to its parent: references %+v, parent %q; want %+v and %s", consumer.References, consumer.Parent(), want, parent.SpanID)
	}
	if !tr.Within(child, parent) || tr.Within(parent, child) || tr.Within(parent, parent) {
		t.Errorf("Within: the child within the parent %v, the parent within the child %v, within itself %v; want true, false, false",
			tr.Within(child, parent), tr.Within(parent, child), tr.Within(parent, parent))
	}
	if !slices.Contains(child.References, Reference{RefType: FollowsFrom, TraceID: linked.TraceID().String(), SpanID: linked.SpanID().String()}) {
		t.Errorf("the child's references %+v lack the link to %s", child.References, linked.SpanID())
	}
	if got := tr.Processes[parent.ProcessID].Tags; !slices.Contains(got, KeyValue{Key: "probe.resource", Type: "string", Value: "r1"}) {
		t.Errorf("the process's tags %+v lack the resource attribute probe.resource=r1", got)
	}
	for key, want := range map[string]string{"probe.key": "probe-value", "probe.count": "2", "span.kind": "producer"} {
		if got, ok := parent.Tag(key); got != want {
			t.Errorf("the parent's tag %s: %q (%v), want %q", key, got, ok, want)
		}
	}
	if !strings.Contains(tr.String(), "    probe child [jaegertest-probe]") {
		t.Errorf("the trace as text does not show the child under the parent:\n%s", tr)
	}

	found := j.WaitTraces(t, "jaegertest-probe", map[string]string{"probe.key": "probe-value"}, nil)
	if len(found) != 1 || found[0].TraceID != id {
		t.Errorf("the search by tag found %d traces, want the one of %s", len(found), id)
	}
	if none, err := j.Traces("jaegertest-probe", map[string]string{"probe.key": "another"}); err != nil || len(none) != 0 {
		t.Errorf("a search by another tag value found %d traces (%v), want none", len(none), err)
	}
	if got := j.WaitServices(t, "jaegertest-probe"); !slices.Equal(got, []string{"jaegertest-probe"}) {
		t.Errorf("services %q: Jaeger lists a service of its own", got)
	}
	if _, err := j.Trace(strings.Repeat("ab", 16)); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown trace: %v, want ErrNotFound", err)
	}
	if resp, err := http.Get(j.TraceURL(id)); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the UI's page of the trace: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	j.Stop()
	if j.Running() {
		t.Error("Jaeger runs after Stop")
	}
	if _, err := j.Services(); err == nil {
		t.Error("the stopped Jaeger still answers")
	}
}

func TestTheRigRunsTheVersionTheToolsModulePins(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "\n\t"+module+" "+Version+" ") {
		t.Errorf("tools/go.mod does not require %s %s:\n%s", module, Version, mod)
	}
	if !strings.Contains(string(mod), "\ntool "+module+"/cmd/jaeger\n") {
		t.Errorf("tools/go.mod names no tool %s/cmd/jaeger", module)
	}
}

func TestBinaryRefusesAJaegerOfAnotherBuildAndNamesWhatItFound(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GOPATH", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOBIN", dir)
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "no jaeger binary in "+filepath.Join(dir, "jaeger")) {
		t.Errorf("with no binary: %v", err)
	}
	// This test binary is a Go binary, not built from Jaeger's module.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jaeger"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "no jaeger "+Version+": found "+filepath.Join(dir, "jaeger")+" (not built from "+module+")") {
		t.Errorf("with another Go binary: %v", err)
	}
}

func TestTheUIIsAPlaceholderUnlessItsAssetsAreGiven(t *testing.T) {
	t.Setenv(UIAssetsEnv, "")
	if has, err := Start(t).HasUI(); err != nil || has {
		t.Errorf("a Jaeger built from the Go module: HasUI %v, %v; want its placeholder page", has, err)
	}
	assets := t.TempDir()
	const page = "<!doctype html><title>Jaeger UI</title><div id=jaeger-ui-root></div>"
	if err := os.WriteFile(filepath.Join(assets, "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(UIAssetsEnv, assets)
	j := Start(t)
	if has, err := j.HasUI(); err != nil || !has {
		t.Errorf("with %s: HasUI %v, %v; want the UI of the assets given", UIAssetsEnv, has, err)
	}
	resp, err := http.Get(j.TraceURL(strings.Repeat("ab", 16)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "jaeger-ui-root") {
		t.Errorf("the trace's page serves %.200q, want the given UI's index.html", body)
	}
}
