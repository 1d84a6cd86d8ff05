package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// The probe's requests name the target's provider and destination, in the
// call and in the request document, so that a router sends them to the
// target and the document says what it is for.
func TestTheProbesRequestsNameTheTargetsProviderAndDestination(t *testing.T) {
	for _, c := range []struct {
		name                  string
		provider, destination string
		wantProvider, wantDoc string
		wantDestination       string
	}{
		{"a target naming none is the fake service's default destination", "", "", document.ProviderFake, "", "default"},
		{"a CalDAV target at team", document.ProviderCalDAV, "team", document.ProviderCalDAV, "team", "team"},
		{"a CalDAV target at default leaves the destination out of the document", document.ProviderCalDAV, "default", document.ProviderCalDAV, "", "default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []taskservice.Request
			n := 0
			svc := taskservice.Func(func(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, req)
				n++
				return taskservice.Result{Outcome: taskservice.Created, TaskID: fmt.Sprintf("task-%d", n)}, nil
			})
			target := probe.Target{Target: servicetest.Target{Name: "t", Service: svc}, Provider: c.provider, Destination: c.destination}
			plan, err := probe.NewPlan(target, probe.Options{Options: servicetest.Options{Concurrency: 2, RunID: "dest"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := probe.Run(context.Background(), target, plan); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) == 0 {
				t.Fatal("the probe made no call")
			}
			for _, req := range calls {
				v, err := document.Parse(req.Request)
				if err != nil {
					t.Fatal(err)
				}
				q, err := document.DecodeRequest("$", v)
				if err != nil {
					t.Fatalf("the probe's request does not decode: %v", err)
				}
				if req.Provider != c.wantProvider || req.Destination != c.wantDestination || q.Provider != c.wantProvider || q.Destination != c.wantDoc {
					t.Fatalf("call for %s/%s, document for %s/%q; want %s/%s and %s/%q",
						req.Provider, req.Destination, q.Provider, q.Destination, c.wantProvider, c.wantDestination, c.wantProvider, c.wantDoc)
				}
			}
		})
	}
}
