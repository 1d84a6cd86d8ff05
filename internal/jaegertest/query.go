package jaegertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Trace is a trace as Jaeger's HTTP API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace. OpenTelemetry's span kind, status and
// instrumentation scope are tags ("span.kind", "otel.status_code",
// "otel.scope.name"), as Jaeger translates them.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	// StartTime is in microseconds since the Unix epoch, Duration in
	// microseconds.
	StartTime int64      `json:"startTime"`
	Duration  int64      `json:"duration"`
	Tags      []KeyValue `json:"tags"`
	ProcessID string     `json:"processID"`
}

// Reference is a span's parent (RefType CHILD_OF) or a link of it
// (FOLLOWS_FROM).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// The reference types: the parent, and a link.
const (
	ChildOf     = "CHILD_OF"
	FollowsFrom = "FOLLOWS_FROM"
)

// KeyValue is a tag; Value is a string, a bool or a json.Number.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the resource a span was made in.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Tag returns the value of the span's tag key as text (numbers in
// decimal, bools as true or false), and whether the span has it.
func (s Span) Tag(key string) (string, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value), true
		}
	}
	return "", false
}

// Parent is the id of the span's parent in its trace, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == ChildOf && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// Service is the name of the service that made the span.
func (tr Trace) Service(s Span) string { return tr.Processes[s.ProcessID].ServiceName }

// Services are the names of the services with a span in the trace, sorted.
func (tr Trace) Services() []string {
	var names []string
	for _, s := range tr.Spans {
		if n := tr.Service(s); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Named returns the trace's spans whose operation is name, earliest first.
func (tr Trace) Named(name string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Span) int { return int(a.StartTime - b.StartTime) })
	return out
}

// Children returns the spans whose parent is parent, earliest first.
func (tr Trace) Children(parent Span) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.Parent() == parent.SpanID {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Span) int { return int(a.StartTime - b.StartTime) })
	return out
}

// Operations are the operation names of spans, in their order.
func Operations(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.OperationName
	}
	return out
}

// String lists the trace's spans as a tree, one a line with its service
// and tags, for a failure's message.
func (tr Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s:\n", tr.TraceID)
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range tr.Spans {
			if s.Parent() != parent && (parent != "" || tr.has(s.Parent())) {
				continue
			}
			fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth+1), s.OperationName, tr.Service(s))
			for _, kv := range s.Tags {
				fmt.Fprintf(&b, " %s=%v", kv.Key, kv.Value)
			}
			b.WriteByte('\n')
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

// has reports whether the trace holds a span of id.
func (tr Trace) has(id string) bool {
	return id != "" && slices.ContainsFunc(tr.Spans, func(s Span) bool { return s.SpanID == id })
}

// answer is the envelope of every answer of Jaeger's HTTP API.
type answer[T any] struct {
	Data   T `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

// ErrNotFound is the error of Trace for a trace Jaeger does not hold.
var ErrNotFound = errors.New("jaegertest: trace not found")

// get fetches path (with its query) from the API and decodes its data.
func get[T any](j *Jaeger, path string) (T, error) {
	var a answer[T]
	resp, err := j.client.Get(j.UI + path)
	if err != nil {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return a.Data, fmt.Errorf("jaegertest: GET %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return a.Data, fmt.Errorf("%w: GET %s", ErrNotFound, path)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %d, decoding %.200q: %w", path, resp.StatusCode, body, err)
	}
	if resp.StatusCode != http.StatusOK || len(a.Errors) > 0 {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %d %v", path, resp.StatusCode, a.Errors)
	}
	return a.Data, nil
}

// Services lists the services Jaeger holds spans of, sorted.
func (j *Jaeger) Services() ([]string, error) {
	names, err := get[[]string](j, "/api/services")
	slices.Sort(names)
	return names, err
}

// Trace fetches the trace of id (32 hex digits); ErrNotFound when Jaeger
// holds none of it.
func (j *Jaeger) Trace(id string) (Trace, error) {
	traces, err := get[[]Trace](j, "/api/traces/"+url.PathEscape(id))
	if err != nil {
		return Trace{}, err
	}
	if len(traces) != 1 {
		return Trace{}, fmt.Errorf("jaegertest: GET /api/traces/%s: %d traces", id, len(traces))
	}
	return traces[0], nil
}

// Traces searches the traces with a span of service in the last hour
// (up to 1000), and with tags, when given, a span carrying every one of
// them.
func (j *Jaeger) Traces(service string, tags map[string]string) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {"1000"}, "lookback": {"1h"},
		"start": {strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10)},
		"end":   {strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)}}
	if len(tags) > 0 {
		b, err := json.Marshal(tags)
		if err != nil {
			return nil, fmt.Errorf("jaegertest: encoding the tags: %w", err)
		}
		q.Set("tags", string(b))
	}
	return get[[]Trace](j, "/api/traces?"+q.Encode())
}

// waitTimeout bounds the waits: a program's batch span processor exports
// every 5 s unless told otherwise (Env tells 100 ms).
const waitTimeout = 30 * time.Second

// WaitTrace waits until Jaeger holds the trace of id and until(trace)
// holds (until may be nil), and returns it; it fails the test after 30 s,
// showing the trace as it last was.
func (j *Jaeger) WaitTrace(t testing.TB, id string, until func(Trace) bool) Trace {
	t.Helper()
	var last Trace
	var lastErr error
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(100 * time.Millisecond) {
		tr, err := j.Trace(id)
		if err == nil {
			last = tr
			if until == nil || until(tr) {
				return tr
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("jaegertest: the trace %s is not as the test waits for after %s (last error: %v); it holds:\n%s", id, waitTimeout, lastErr, last)
		}
	}
}

// WaitTraces waits until the traces Traces(service, tags) finds make
// until true (until may be nil: at least one trace), and returns them; it
// fails the test after 30 s.
func (j *Jaeger) WaitTraces(t testing.TB, service string, tags map[string]string, until func([]Trace) bool) []Trace {
	t.Helper()
	if until == nil {
		until = func(trs []Trace) bool { return len(trs) > 0 }
	}
	var last []Trace
	var lastErr error
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(100 * time.Millisecond) {
		trs, err := j.Traces(service, tags)
		if err == nil {
			last = trs
			if until(trs) {
				return trs
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("jaegertest: the traces of service %s with tags %v are not as the test waits for after %s (last error: %v); %d found", service, tags, waitTimeout, lastErr, len(last))
		}
	}
}

// WaitServices waits until Jaeger lists every one of services, and
// returns all it lists; it fails the test after 30 s.
func (j *Jaeger) WaitServices(t testing.TB, services ...string) []string {
	t.Helper()
	var last []string
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(100 * time.Millisecond) {
		names, err := j.Services()
		if err == nil {
			last = names
			if !slices.ContainsFunc(services, func(s string) bool { return !slices.Contains(names, s) }) {
				return names
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaegertest: Jaeger lists the services %q after %s, want %q among them (last error: %v)", last, waitTimeout, services, err)
		}
	}
}
