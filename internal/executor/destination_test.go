package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
)

var (
	caldavDefault = gate.Destination{Provider: document.ProviderCalDAV, Name: "default"}
	fakeSecond    = gate.Destination{Provider: document.ProviderFake, Name: "second"}
)

func built(t *testing.T, f scenario.For) *scenario.Seed {
	t.Helper()
	s, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTheCallCarriesTheRequestsProviderAndDestination(t *testing.T) {
	for _, c := range []struct {
		name                  string
		f                     scenario.For
		provider, destination string
	}{
		{"a seed request is for the fake service's default destination", scenario.Fake, document.ProviderFake, "default"},
		{"a CalDAV request for team is for CalDAV's team", scenario.CalDAV.At("team"), document.ProviderCalDAV, "team"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := gate.CheckBindings(built(t, c.f).Original.Envelope())
			if err != nil {
				t.Fatal(err)
			}
			req := executor.CallRequest(v, topology.CallRef(1, 1, "a"))
			if req.Provider != c.provider || req.Destination != c.destination {
				t.Errorf("call for %q, %q; want %q, %q", req.Provider, req.Destination, c.provider, c.destination)
			}
		})
	}
}

func TestARequestForADestinationTheExecutorDoesNotServeNeverReachesTheService(t *testing.T) {
	for _, c := range []struct {
		name   string
		serves []gate.Destination // nil: the executor's default
		msg    scenario.Approved
		path   string
	}{
		{"a CalDAV request is refused by an executor of the fake service", nil,
			built(t, scenario.CalDAV).Original, "$.request.provider"},
		{"a request for the fake service's team is refused by an executor serving its default", nil,
			built(t, scenario.Fake.At("team")).Original, "$.request.destination"},
		{"a seed (fake) request is refused by an executor serving a CalDAV calendar", []gate.Destination{caldavDefault},
			built(t, scenario.Fake).Original, "$.request.provider"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{AllowUnsigned: true, Serves: c.serves}})
			rc := send(t, env, c.msg.Envelope())
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckDestination {
				t.Fatalf("receipt %+v; want rejected at destination", rc)
			}
			if rc.Rejection.Path != c.path || !strings.Contains(rc.Rejection.Reason, "serves only") {
				t.Errorf("rejection %+v; want one at %s saying what is served", rc.Rejection, c.path)
			}
			wantCounts(t, env.Counts(), 0, 0, 0)
		})
	}
}

// A request that names the fake service's one destination, default, as
// the gate accepts, is created by the fake service (which reads the request
// strictly) and not dead-lettered.
func TestAFakeRequestNamingTheDefaultDestinationIsCreated(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	msg := built(t, scenario.Fake.At("default")).Original
	if !strings.Contains(string(msg.Request), `"destination": "default"`) {
		t.Fatalf("the request does not name its destination: %s", msg.Request)
	}
	rc := send(t, env, msg.Envelope())
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("receipt %s %+v %+v; want created", rc.Outcome, rc.Rejection, rc.Failure)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
}

// countingService counts the calls it takes and answers created.
type countingService struct {
	mu    sync.Mutex
	calls []taskservice.Request
}

func (s *countingService) Create(_ context.Context, req taskservice.Request) (taskservice.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req)
	return taskservice.Result{Outcome: taskservice.Created, TaskID: "second-task-" + req.IntentID}, nil
}

func (s *countingService) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func TestAnExecutorServingSeveralDestinationsRoutesEachCallToItsOwn(t *testing.T) {
	env := testenv.Start(t)
	fake := provider.NewClient(env.NC)
	second := &countingService{}
	router, err := executor.NewRouter(
		executor.Route{Destination: executor.FakeDefault, Service: fake.TaskService()},
		executor.Route{Destination: fakeSecond, Service: second},
	)
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", TaskService: router, Gate: &gate.Checker{AllowUnsigned: true, Serves: router.Serves()}})

	rc := send(t, env, built(t, scenario.Fake).Original.Envelope())
	if rc.Outcome != document.OutcomeCreated || second.n() != 0 {
		t.Fatalf("the default destination's request: receipt %s, %d calls to the second service; want created by the fake service, none", rc.Outcome, second.n())
	}
	wantCounts(t, env.Counts(), 1, 1, 1)

	rc = send(t, env, built(t, scenario.Fake.At("second")).NewIntent.Envelope())
	if rc.Outcome != document.OutcomeCreated || rc.TaskID == nil || !strings.HasPrefix(*rc.TaskID, "second-task-") || second.n() != 1 {
		t.Fatalf("the second destination's request: receipt %+v, %d calls; want created by the second service, one call", rc, second.n())
	}
	wantCounts(t, env.Counts(), 1, 1, 1)

	rc = send(t, env, built(t, scenario.Fake.At("third")).Original.Envelope())
	if rc.Outcome != document.OutcomeRejected || rc.Rejection.Check != gate.CheckDestination ||
		!strings.Contains(rc.Rejection.Reason, `"fake-task-provider.v1/default", "fake-task-provider.v1/second"`) {
		t.Fatalf("a request for a third destination: receipt %+v; want rejected at destination naming the two served", rc)
	}
	wantCounts(t, env.Counts(), 1, 1, 1)
	if second.n() != 1 {
		t.Fatalf("the second service took %d calls; want 1", second.n())
	}
}

func TestTheRouterRefusesACallForADestinationItHasNoServiceFor(t *testing.T) {
	second := &countingService{}
	router, err := executor.NewRouter(executor.Route{Destination: fakeSecond, Service: second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  taskservice.Request
	}{
		{"a call for another destination of the provider", taskservice.Request{Provider: document.ProviderFake, Destination: "third", IntentID: "i"}},
		{"a call naming no destination (the default one)", taskservice.Request{Provider: document.ProviderFake, IntentID: "i"}},
		{"a call for another provider's destination of that name", taskservice.Request{Provider: document.ProviderCalDAV, Destination: "second", IntentID: "i"}},
	} {
		t.Run(c.name+" is a permanent error and reaches no service", func(t *testing.T) {
			_, err := router.Create(context.Background(), c.req)
			if !errors.Is(err, executor.ErrNoRoute) || !taskservice.IsPermanent(err) {
				t.Fatalf("Create: %v; want a permanent ErrNoRoute", err)
			}
			if !strings.Contains(err.Error(), "fake-task-provider.v1/second") {
				t.Errorf("the error does not name what is served: %v", err)
			}
			if second.n() != 0 {
				t.Fatalf("the service took %d calls", second.n())
			}
		})
	}
}

func TestNewRouterRefusesABadTable(t *testing.T) {
	svc := &countingService{}
	for _, c := range []struct {
		name   string
		routes []executor.Route
		says   string
	}{
		{"no destination", nil, "at least one"},
		{"a destination named twice", []executor.Route{{Destination: fakeSecond, Service: svc}, {Destination: fakeSecond, Service: svc}}, "named twice"},
		{"a destination without a service", []executor.Route{{Destination: fakeSecond}}, "no task service"},
		{"a destination name in upper case", []executor.Route{{Destination: gate.Destination{Provider: document.ProviderFake, Name: "Team"}, Service: svc}}, `"Team"`},
		{"an unknown provider", []executor.Route{{Destination: gate.Destination{Provider: "caldav.v1", Name: "team"}, Service: svc}}, `"caldav.v1"`},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := executor.NewRouter(c.routes...)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("NewRouter: %v; want an error saying %s", err, c.says)
			}
		})
	}
}
