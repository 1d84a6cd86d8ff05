package jaegertest

import (
	"fmt"
	"slices"
	"strings"
)

// The answers of Jaeger's HTTP API are decoded into the types below by
// their fields' names: encoding/json matches "traceID", "operationName",
// "processID" and the others to them regardless of case.

// Trace is a trace as Jaeger's HTTP API returns it.
type Trace struct {
	TraceID   string
	Spans     []Span
	Processes map[string]Process
}

// Span is one span of a Trace. OpenTelemetry's span kind, status and
// instrumentation scope are tags ("span.kind", "otel.status_code",
// "otel.scope.name"), as Jaeger translates them. StartTime is in
// microseconds since the Unix epoch, Duration in microseconds.
type Span struct {
	TraceID, SpanID, OperationName, ProcessID string
	StartTime, Duration                       int64
	References                                []Reference
	Tags                                      []KeyValue
}

// Reference is a span's parent (RefType ChildOf) or a link of it
// (FollowsFrom).
type Reference struct{ RefType, TraceID, SpanID string }

// The reference types: the parent, and a link.
const (
	ChildOf     = "CHILD_OF"
	FollowsFrom = "FOLLOWS_FROM"
)

// KeyValue is a tag; Value is a string, a bool or a json.Number.
type KeyValue struct {
	Key, Type string
	Value     any
}

// Process is the resource a span was made in.
type Process struct {
	ServiceName string
	Tags        []KeyValue
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

// Parent is the id of the span's parent in its trace, "" for a root: its
// CHILD_OF reference, else its first FOLLOWS_FROM reference in the trace.
// A span linked to its own parent (a consumer span linked to the producer
// span it continues) comes out of Jaeger's translation with that one
// reference, as FOLLOWS_FROM; Jaeger's UI too takes a span's first
// reference as its parent.
func (s Span) Parent() string {
	first := ""
	for _, r := range s.References {
		switch {
		case r.TraceID != s.TraceID:
		case r.RefType == ChildOf:
			return r.SpanID
		case first == "":
			first = r.SpanID
		}
	}
	return first
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

// Within reports whether s descends from ancestor: ancestor is its parent,
// or its parent's parent, and so on.
func (tr Trace) Within(s, ancestor Span) bool {
	for seen := 0; s.Parent() != "" && seen < len(tr.Spans); seen++ {
		if s.Parent() == ancestor.SpanID {
			return true
		}
		i := slices.IndexFunc(tr.Spans, func(p Span) bool { return p.SpanID == s.Parent() })
		if i < 0 {
			return false
		}
		s = tr.Spans[i]
	}
	return false
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
