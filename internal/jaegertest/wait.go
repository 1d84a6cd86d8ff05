package jaegertest

import (
	"slices"
	"testing"
	"time"
)

// Services lists the services Jaeger holds spans of, sorted.
func (j *Jaeger) Services() ([]string, error) {
	names, err := get[[]string](j, "/api/services")
	slices.Sort(names)
	return names, err
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
