package executor_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
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
			rc := env.Send(c.msg.Envelope())
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
	rc := env.Send(msg.Envelope())
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

	rc := env.Send(built(t, scenario.Fake).Original.Envelope())
	if rc.Outcome != document.OutcomeCreated || second.n() != 0 {
		t.Fatalf("the default destination's request: receipt %s, %d calls to the second service; want created by the fake service, none", rc.Outcome, second.n())
	}
	wantCounts(t, env.Counts(), 1, 1, 1)

	rc = env.Send(built(t, scenario.Fake.At("second")).NewIntent.Envelope())
	if rc.Outcome != document.OutcomeCreated || rc.TaskID == nil || !strings.HasPrefix(*rc.TaskID, "second-task-") || second.n() != 1 {
		t.Fatalf("the second destination's request: receipt %+v, %d calls; want created by the second service, one call", rc, second.n())
	}
	wantCounts(t, env.Counts(), 1, 1, 1)

	rc = env.Send(built(t, scenario.Fake.At("third")).Original.Envelope())
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

// errLost is what a PUT whose answer the test dropped returns.
var errLost = errors.New("the answer was dropped after the server stored the task")

// losePUT passes requests on to the server; when armed, it lets the server
// answer the next PUT and then drops the answer, as a broken connection
// would.
// When hold is set, a PUT whose path ends in it first says so on held
// and waits for release, before it reaches the server.
type losePUT struct {
	armed   atomic.Bool
	hold    string
	held    chan struct{}
	release chan struct{}
}

func (l *losePUT) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.hold != "" && req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, l.hold) {
		l.held <- struct{}{}
		<-l.release
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut || !l.armed.CompareAndSwap(true, false) {
		return resp, err
	}
	resp.Body.Close()
	return nil, errLost
}

// countingLocker counts the locks taken through the intent ledger.
// The first refusal (another holder has the lock) is said on refused.
type countingLocker struct {
	l       *ledger.Ledger
	taken   atomic.Int64
	refused chan struct{}
}

func (c *countingLocker) Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (taskservice.Lock, error) {
	lk, err := c.l.Lock(ctx, scope, intentID, ttl)
	if err == nil {
		c.taken.Add(1)
	}
	if errors.Is(err, taskservice.ErrLocked) {
		select {
		case c.refused <- struct{}{}:
		default:
		}
	}
	return lk, err
}

// oneTaskRig is an executor's task service over calendars of one real
// Radicale server: the router of their adapters, kept to one task per key
// across them by the intent ledger's locks on a real JetStream, and
// composed with the ledger as serve composes it.
type oneTaskRig struct {
	srv      *davtest.Server
	adapters map[string]*caldav.Adapter
	lose     *losePUT
	locks    *countingLocker
	ledger   *ledger.Ledger
	svc      taskservice.Service
}

// startOneTaskRig serves the destinations named (default is the server's
// collection; others are made as calendars beside it), with a lock TTL of
// one second.
func startOneTaskRig(t *testing.T, names ...string) *oneTaskRig {
	t.Helper()
	return startOneTaskRigHolding(t, "", names...)
}

// startOneTaskRigHolding is startOneTaskRig whose PUTs of a path ending in
// hold wait for the test to release them.
func startOneTaskRigHolding(t *testing.T, hold string, names ...string) *oneTaskRig {
	t.Helper()
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	l := testenv.Ledger(t, testenv.JetStream(t), ledger.Options{ClockAllowance: -1, Margin: -1})
	r := &oneTaskRig{srv: srv, adapters: map[string]*caldav.Adapter{}, lose: &losePUT{held: make(chan struct{}), release: make(chan struct{})},
		locks: &countingLocker{l: l, refused: make(chan struct{}, 1)}, ledger: l}
	r.lose.hold = hold
	var routes []executor.Route
	for _, name := range names {
		url := srv.CollectionURL
		if name != document.DefaultDestination {
			path := strings.TrimSuffix(srv.CollectionPath, "tasks/") + name + "/"
			srv.MakeCalendar(path, name, "VTODO")
			url = srv.BaseURL + path
		}
		a, err := caldav.New(caldav.Config{CollectionURL: url, HTTPClient: &http.Client{Transport: r.lose, Timeout: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		r.adapters[name] = a
		routes = append(routes, executor.Route{Destination: gate.Destination{Provider: document.ProviderCalDAV, Name: name}, Service: a})
	}
	router, err := executor.NewRouter(routes...)
	if err != nil {
		t.Fatal(err)
	}
	one, err := router.OneTaskPerKey(r.locks, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.svc, err = taskservice.KeepDeletedKeys(one, l); err != nil {
		t.Fatal(err)
	}
	return r
}

// tasks counts the tasks of intentID in every served calendar.
func (r *oneTaskRig) tasks(t *testing.T, intentID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, a := range r.adapters {
		l, err := a.Tasks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range l.Tasks {
			if task.IntentID == intentID {
				out[name]++
			}
		}
	}
	return out
}

// calDAVRequest is a request for intentID in destination dest; digest
// stands for the request's content (the destination is part of it).
func calDAVRequest(intentID, dest, digest string) taskservice.Request {
	return taskservice.Request{IntentID: intentID, RequestDigest: "sha256:" + strings.Repeat(digest, 32), RequestID: "task-request-" + dest,
		Task: taskservice.Task{Title: "Check the notification settings"}, Provider: document.ProviderCalDAV, Destination: dest,
		NotAfter: time.Now()}
}

// The defect: a create in one destination whose reply is lost (or whose
// ledger entry expired) leaves the intent ledger without the key, and a
// request for the same key in another destination made a second task.
// Now the second request is answered idempotency_conflict with the first
// task's id and destination, and creates nothing; the first one's
// redelivery replays.
func TestAKeyHasOneTaskAcrossTheCalDAVDestinationsOfAnExecutor(t *testing.T) {
	for _, c := range []struct {
		name string
		// first makes the task of the key in default such that the
		// intent ledger does not know it.
		first func(t *testing.T, r *oneTaskRig, req taskservice.Request)
	}{
		{"when the reply of the first create in default was lost", func(t *testing.T, r *oneTaskRig, req taskservice.Request) {
			r.lose.armed.Store(true)
			_, err := r.svc.Create(context.Background(), req)
			if !errors.Is(err, errLost) || taskservice.IsPermanent(err) {
				t.Fatalf("the first create answered %v; want the lost reply, transient", err)
			}
		}},
		{"when the intent ledger's entry of the first create in default expired", func(t *testing.T, r *oneTaskRig, req taskservice.Request) {
			res, err := r.svc.Create(context.Background(), req)
			if err != nil || res.Outcome != taskservice.Created {
				t.Fatalf("the first create answered %+v, %v; want created", res, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				_, known, err := r.ledger.Get(ctx, req.KeyScope(), req.IntentID)
				if err != nil {
					t.Fatal(err)
				}
				if !known {
					return
				}
				select {
				case <-ctx.Done():
					t.Fatal("the ledger's entry did not expire")
				case <-time.After(100 * time.Millisecond):
				}
			}
		}},
	} {
		t.Run(c.name+", the same intent for team is refused and creates nothing", func(t *testing.T) {
			r := startOneTaskRig(t, document.DefaultDestination, "team")
			const intent = "intent-across-1"
			first := calDAVRequest(intent, document.DefaultDestination, "aa")
			c.first(t, r, first)

			// Long enough to wait out a lock kept after a lost reply.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := r.svc.Create(ctx, calDAVRequest(intent, "team", "bb"))
			if err != nil {
				t.Fatalf("the create in team failed: %v", err)
			}
			if res.Outcome != taskservice.Conflict || res.TaskID != caldav.TaskID(taskservice.DefaultScope, intent) ||
				!strings.Contains(res.Reason, "caldav-task.v1/default") || res.StoreID != r.adapters[document.DefaultDestination].StoreID() {
				t.Errorf("the create in team answered %+v; want idempotency_conflict with the task and store of default, naming it", res)
			}
			again, err := r.svc.Create(ctx, first)
			if err != nil || again.Outcome != taskservice.Replayed {
				t.Errorf("the first request's redelivery answered %+v, %v; want replayed", again, err)
			}
			if got := r.tasks(t, intent); got[document.DefaultDestination] != 1 || got["team"] != 0 {
				t.Errorf("the calendars hold %v tasks of the intent; want one, in default", got)
			}
		})
	}
}

// One destination has nothing to keep apart: the router is served as it
// is, and no create takes a lock; two destinations take one per create.
func TestOnlyAnExecutorOfSeveralDestinationsLocksAKeyBeforeItsCreate(t *testing.T) {
	for _, c := range []struct {
		name  string
		dests []string
		locks int64
	}{
		{"an executor of one destination creates without a lock", []string{document.DefaultDestination}, 0},
		{"an executor of two destinations takes the key's lock for its create", []string{document.DefaultDestination, "team"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startOneTaskRig(t, c.dests...)
			res, err := r.svc.Create(context.Background(), calDAVRequest("intent-lock-1", document.DefaultDestination, "aa"))
			if err != nil || res.Outcome != taskservice.Created {
				t.Fatalf("the create answered %+v, %v; want created", res, err)
			}
			if n := r.locks.taken.Load(); n != c.locks {
				t.Errorf("%d locks were taken; want %d", n, c.locks)
			}
			if got := r.tasks(t, "intent-lock-1"); got[document.DefaultDestination] != 1 {
				t.Errorf("the calendars hold %v tasks of the intent; want one, in default", got)
			}
		})
	}
}

// While a create of the key is on its way to default's server, a request
// for the key in team waits for the key's lock, then finds the task in
// default: it creates nothing. Without the lock it looked default up too
// early, found nothing, and made a second task in team.
func TestACreateInFlightInOneDestinationKeepsTheKeyFromAnother(t *testing.T) {
	const intent = "intent-inflight-1"
	r := startOneTaskRigHolding(t, "/tasks/"+intent+".ics", document.DefaultDestination, "team")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		res taskservice.Result
		err error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		res, err := r.svc.Create(ctx, calDAVRequest(intent, document.DefaultDestination, "aa"))
		first <- answer{res, err}
	}()
	<-r.lose.held // default's create holds the lock, its PUT not yet sent
	go func() {
		res, err := r.svc.Create(ctx, calDAVRequest(intent, "team", "bb"))
		second <- answer{res, err}
	}()
	var got answer
	select {
	case <-r.locks.refused: // team's create waits for the lock
	case got = <-second:
		t.Errorf("team's create answered %+v, %v while default's create was on its way; want it to wait for the key's lock", got.res, got.err)
	}
	close(r.lose.release)
	if a := <-first; a.err != nil || a.res.Outcome != taskservice.Created {
		t.Errorf("default's create answered %+v, %v; want created", a.res, a.err)
	}
	if got.res.Outcome == "" && got.err == nil {
		got = <-second
	}
	t.Run("team's create is answered idempotency_conflict naming default", func(t *testing.T) {
		if got.err != nil || got.res.Outcome != taskservice.Conflict || !strings.Contains(got.res.Reason, "caldav-task.v1/default") {
			t.Errorf("team's create answered %+v, %v", got.res, got.err)
		}
	})
	t.Run("the calendars hold one task of the intent, in default", func(t *testing.T) {
		if n := r.tasks(t, intent); n[document.DefaultDestination] != 1 || n["team"] != 0 {
			t.Errorf("the calendars hold %v", n)
		}
	})
}
