package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// executor calendars against a real Radicale with a login: from the
// server's URL alone it finds the account's calendars and prints those that
// accept tasks, and with --all the others, marked.
func TestCalendarsListsTheAccountsCalendarsThatAcceptTasks(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: "alice", Password: "s3cret"})
	srv.MakeCalendar(srv.HomePath+"work/", "Work", "VTODO")
	srv.MakeCalendar(srv.HomePath+"events/", "Events", "VEVENT")
	pw := writeTestFile(t, "password", "s3cret\n")
	login := []string{"calendars", "--caldav-server", srv.BaseURL, "--caldav-user", "alice", "--caldav-password-file", pw}
	calendars := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(append([]string{}, login...), args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	work := srv.BaseURL + srv.HomePath + "work/"
	events := srv.BaseURL + srv.HomePath + "events/"

	t.Run("the calendars that accept tasks are printed with their names, URLs and components", func(t *testing.T) {
		out, errOut, err := calendars(t)
		if err != nil {
			t.Fatalf("calendars: %v\n%s", err, errOut)
		}
		t.Logf("output:\n%s", out)
		if !lineWith(out, "Work", work, "VTODO") || !strings.Contains(out, srv.CollectionURL) {
			t.Errorf("the output does not list Work (%s) and the rig's calendar:\n%s", work, out)
		}
		if strings.Contains(out, events) {
			t.Errorf("the output lists the events-only calendar without --all:\n%s", out)
		}
	})
	t.Run("with --all the others follow, marked", func(t *testing.T) {
		out, _, err := calendars(t, "--all")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("output:\n%s", out)
		if !lineWith(out, "Events", events, "VEVENT", "does not accept tasks") || lineWith(out, "Work", "does not accept tasks") {
			t.Errorf("the output does not mark Events alone:\n%s", out)
		}
	})
	t.Run("--json gives each calendar and whether it accepts tasks", func(t *testing.T) {
		out, _, err := calendars(t, "--all", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r service.CalendarsReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		got := map[string]service.CalendarEntry{}
		for _, c := range r.Calendars {
			got[c.URL] = c
		}
		if c := got[work]; c.DisplayName != "Work" || !c.AcceptsTasks {
			t.Errorf("Work: %+v", c)
		}
		if c := got[events]; c.DisplayName != "Events" || c.AcceptsTasks || strings.Join(c.Components, ",") != "VEVENT" {
			t.Errorf("Events: %+v", c)
		}
	})
	t.Run("a wrong password is refused with the server's answer, and not shown", func(t *testing.T) {
		var out, errOut bytes.Buffer
		t.Setenv(service.CalDAVPasswordEnv, "a-wrong-one")
		err := run(context.Background(), []string{"calendars", "--caldav-server", srv.PrincipalURL, "--caldav-user", "alice"}, &out, &errOut)
		if !errors.Is(err, caldav.ErrLoginRefused) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error()+out.String()+errOut.String(), "a-wrong-one") {
			t.Errorf("calendars with a wrong password: %v; want the login refused (401), the password not shown", err)
		}
	})
	t.Run("no URL is a usage error", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"calendars"}, &out, &errOut)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "--caldav-server") {
			t.Errorf("calendars without --caldav-server: %v (exit %d); want a usage error naming the flag", err, exitCode(err))
		}
	})
}

// A server with a self-signed certificate is reached with --caldav-ca-file,
// and refused without it.
func TestCalendarsTrustsTheCAFileGiven(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: "alice", Password: "s3cret", TLS: true})
	t.Setenv(service.CalDAVPasswordEnv, "s3cret")
	args := []string{"calendars", "--caldav-server", srv.BaseURL, "--caldav-user", "alice"}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append(args, "--caldav-ca-file", srv.CAFile), &out, &errOut); err != nil || !strings.Contains(out.String(), srv.CollectionURL) {
		t.Fatalf("with the CA file: %v; output:\n%s", err, out.String())
	}
	out.Reset()
	err := run(context.Background(), args, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA file: %v; want a certificate error", err)
	}
}

// lineWith reports whether one line of out holds every part.
func lineWith(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// The demo against a real CalDAV server, told twice against one collection
// and keeping its tasks (--keep-tasks):
// each run's table is all ok, and the server's own log and storage agree
// with it: for A one PUT, answered 201 (the replay, the conflict and the
// resend after its owner deleted the task are answered from the intent
// ledger, which knows the key, with a read of the resource and no PUT), for
// C one 201 among two PUTs (the answer lost before the ledger knew the key,
// then the redelivery), one .ics file for B and for C, none for A.
func TestDemoAgainstACalDAVServer(t *testing.T) {
	s := davtest.Start(t, davtest.Xandikos, davtest.Options{})
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	intentRE := regexp.MustCompile(`(?m)^intent ([ABC]): (\S+)$`)
	var all, deleted []string
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out, errOut bytes.Buffer
		err := runDemoCmd(ctx, &out, &errOut, "--task-service", "caldav", "--caldav-url", s.CollectionURL, "--keep-tasks")
		cancel()
		if err != nil {
			t.Fatalf("run %d: demo failed: %v\n%s\n%s", run, err, out.String(), errOut.String())
		}
		table := out.String()
		if strings.Contains(table, "DIFFERS") {
			t.Errorf("run %d: a row differs:\n%s", run, table)
		}
		m := intentRE.FindAllStringSubmatch(table, -1)
		if len(m) != 3 {
			t.Fatalf("run %d: the demo names %d intents, want A, B and C:\n%s", run, len(m), table)
		}
		intents := map[string]string{}
		for _, x := range m {
			intents[x[1]] = x[2]
		}
		task := func(letter string) string { return caldav.TaskID(demo.Scope, intents[letter]) }
		for _, want := range []string{
			"task service: CalDAV collection " + s.CollectionURL,
			"created " + task("A"), "replayed " + task("A"), "idempotency_conflict " + task("A"),
			"A 1, its digest unchanged", "created " + task("B"), "rejected at",
			"replayed " + task("A") + " (task deleted)", "A 0, B 1",
			"replayed " + task("C"), "A 0, B 1, C 1", "Where the figures come from",
		} {
			if !strings.Contains(table, want) {
				t.Errorf("run %d: the table lacks %q:\n%s", run, want, table)
			}
		}
		// The server's own log: requests received and creates executed.
		for _, tc := range []struct {
			letter        string
			puts, creates int
		}{{"A", 1, 1}, {"B", 1, 1}, {"C", 2, 1}} {
			name, err := caldav.ScopedResourceName(demo.Scope, intents[tc.letter])
			if err != nil {
				t.Fatal(err)
			}
			if tc.letter == "A" {
				deleted = append(deleted, name)
			} else {
				all = append(all, name)
			}
			path := s.ResourcePath(name)
			if p, c := s.PUTs(path), s.Creates(path); p != tc.puts || c != tc.creates {
				t.Errorf("run %d: the server's log shows %d PUTs and %d creates (201) for %s (%s), want %d and %d",
					run, p, c, tc.letter, path, tc.puts, tc.creates)
			}
		}
	}
	// The server's storage: one file for B and for C of both runs, none
	// for A, whose task its owner deleted.
	if got := strings.Join(s.StoredNames(), " "); len(s.StoredNames()) != len(all) {
		t.Errorf("the collection's folder holds %s, want the %d intents B and C of two runs", got, len(all))
	}
	for _, name := range all {
		if s.Stored(name) == nil {
			t.Errorf("the collection's folder lacks %s", name)
		}
	}
	for _, name := range deleted {
		if s.Stored(name) != nil {
			t.Errorf("the collection's folder holds %s, whose task its owner deleted", name)
		}
	}
}

func TestDemoRefusesCalDAVFlagsWithTheFakeService(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runDemoCmd(context.Background(), &out, &errOut, "--caldav-url", "http://127.0.0.1:1/x/")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "need --task-service caldav") {
		t.Errorf("demo --caldav-url without --task-service caldav ended with %v (exit %d), want a usage error", err, exitCode(err))
	}
}

func runDemoCmd(ctx context.Context, stdout, stderr *bytes.Buffer, args ...string) error {
	return run(ctx, append([]string{"demo"}, args...), stdout, stderr)
}

// executor serve reads a CalDAV collection once before it consumes: a wrong
// password stops it with the server's refusal and takes no message; a server
// that is down at start is waited for, and nothing is lost either way.
func TestServeChecksTheCalDAVLoginBeforeItTakesAMessage(t *testing.T) {
	const user, password = "alice", "pw-3c9e41-not-for-print"
	s := testenv.SeedFor(t, scenario.CalDAV)
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: password})
	r := newDAVRig(t, srv)
	passwordFile := func(pw string) string {
		return writeTestFile(t, "password", pw+"\n")
	}
	login := func(pw string) []string {
		return []string{"--caldav-user", user, "--caldav-password-file", passwordFile(pw)}
	}

	// The approval waits in the stream while the executors are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent, err := testenv.Publish(ctx, r.env.JS, s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	seq := sent.StreamSeq

	t.Run("a wrong password stops serve with the server's 401 and takes no message", func(t *testing.T) {
		p := r.executor(t, srv.CollectionURL, "exec-wrong", login("not-the-password")...)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("serve with a wrong password is still running:\n%s", p.out.String())
		}
		out := p.out.String()
		if p.err == nil {
			t.Fatalf("serve with a wrong password exited 0:\n%s", out)
		}
		expectLines(t, "the refusal", out, "refuses this executor", "401")
		if strings.Contains(out, password) || strings.Contains(out, "not-the-password") {
			t.Errorf("a password is in serve's output:\n%s", out)
		}
		if n := srv.Received("PUT", r.resource(t, "intent-0001")); n != 0 {
			t.Errorf("the refused executor sent %d PUTs", n)
		}
	})

	t.Run("a server down at start is waited for, and the message is created once it is back", func(t *testing.T) {
		srv.Stop()
		p := r.executor(t, srv.CollectionURL, "exec-patient", login(password)...)
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(p.out.String(), "does not answer yet") {
			select {
			case <-p.exited:
				t.Fatalf("serve exited while the server was down: %v\n%s", p.err, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve said nothing of the server being down:\n%s", p.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		srv.Restart()
		rcs := awaitReceipts(t, r.env, []uint64{seq}, 60*time.Second)
		created := 0
		for _, rc := range rcs[seq] {
			if rc.Outcome == document.OutcomeCreated {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("want one created receipt for message %d, got %d of %d receipts\n%s", seq, created, len(rcs[seq]), p.out.String())
		}
		if n := srv.Creates(r.resource(t, "intent-0001")); n != 1 {
			t.Errorf("the server answered %d PUTs with 201, want 1", n)
		}
	})
}

// The story, refused now: a reviewer approved the seed's fake task,
// and an executor pointed at a real calendar made a real one. The executor
// serving CalDAV calendars refuses every request that is not for one of
// them at the gate, and the server receives nothing for it; a CalDAV request
// for a served destination lands in that destination's calendar only.
func TestApprovalsAreCarriedOutOnlyInTheDestinationTheyNameOnACalDAVServer(t *testing.T) {
	r := startDAVRig(t, davtest.Radicale)
	teamPath := strings.TrimSuffix(r.srv.CollectionPath, "tasks/") + "team/"
	if code := r.srv.Do("MKCALENDAR", teamPath, nil); code != http.StatusCreated {
		t.Fatalf("MKCALENDAR %s answered %d", teamPath, code)
	}
	p := r.executor(t, r.srv.CollectionURL, "exec-dest", "--destination", "team="+r.srv.BaseURL+teamPath, "--log-level", "info")

	seed := testenv.Seed(t)
	elsewhere, err := scenario.CalDAV.At("ops").Generate(scenario.Candidate(), "ops", 1)
	if err != nil {
		t.Fatal(err)
	}
	resource := func(path, intent string) string { return path + r.name(t, intent) }
	for _, c := range []struct {
		name   string
		msg    scenario.Approved
		intent string
		says   []string
	}{
		{"the seed's approval of a fake task is refused at destination", seed.Original, "intent-0001",
			[]string{`"fake-task-provider.v1"`, `"caldav-task.v1/default", "caldav-task.v1/team"`}},
		{"the seed's new intent is refused at destination", seed.NewIntent, "intent-0002", []string{`"fake-task-provider.v1"`}},
		{"a CalDAV approval for a calendar this executor does not serve is refused at destination", elsewhere, "intent-ops-000001",
			[]string{`destination "ops"`}},
	} {
		t.Run(c.name+", and the server receives nothing for it", func(t *testing.T) {
			rc := sendAndWait(t, r.env, c.msg.Envelope())
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != gate.CheckDestination {
				t.Fatalf("receipt %s %+v; want rejected at destination", rc.Outcome, rc.Rejection)
			}
			for _, s := range c.says {
				if !strings.Contains(rc.Rejection.Reason, s) {
					t.Errorf("the reason does not say %s: %s", s, rc.Rejection.Reason)
				}
			}
			for _, path := range []string{r.srv.CollectionPath, teamPath} {
				if n := r.srv.Received(http.MethodPut, resource(path, c.intent)); n != 0 {
					t.Errorf("the server received %d PUTs of %s", n, resource(path, c.intent))
				}
			}
		})
	}
	t.Run("after the refusals, the server has received no PUT and holds no task", func(t *testing.T) {
		for _, e := range r.srv.LogEntries() {
			if e.Received && e.Method == http.MethodPut {
				t.Errorf("the server received a PUT of %s", e.Path)
			}
		}
		if names := r.srv.StoredNames(); len(names) != 0 {
			t.Errorf("the default calendar holds %q", names)
		}
		if l := r.listing(t); len(l.Tasks) != 0 || l.VTODOs != 0 {
			t.Errorf("the default calendar lists %d tasks", l.VTODOs)
		}
	})

	for _, c := range []struct {
		name      string
		f         scenario.For
		prefix    string
		in, notIn string
	}{
		{"a CalDAV approval naming no destination is created in the default calendar only", scenario.CalDAV, "dflt", r.srv.CollectionPath, teamPath},
		{"a CalDAV approval for team is created in team's calendar only", scenario.CalDAV.At("team"), "team", teamPath, r.srv.CollectionPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := c.f.Generate(scenario.Candidate(), c.prefix, 1)
			if err != nil {
				t.Fatal(err)
			}
			rc := sendAndWait(t, r.env, a.Envelope())
			if rc.Outcome != document.OutcomeCreated {
				t.Fatalf("receipt %s %+v %+v; want created", rc.Outcome, rc.Rejection, rc.Failure)
			}
			intent := "intent-" + c.prefix + "-000001"
			if n := r.srv.Creates(resource(c.in, intent)); n != 1 {
				t.Errorf("the server answered %d PUTs of %s with 201; want 1", n, resource(c.in, intent))
			}
			if n := r.srv.Received(http.MethodPut, resource(c.notIn, intent)); n != 0 {
				t.Errorf("the server received %d PUTs of %s; want none", n, resource(c.notIn, intent))
			}
		})
	}
	t.Run("plain verify audits both recorded calendars, and every check holds", func(t *testing.T) {
		out, err := runCommand("verify", "--server", r.env.URL())
		if err != nil {
			t.Fatalf("verify: %v\n%s", err, out)
		}
		expectLines(t, "verify's report", out, r.srv.CollectionURL, r.srv.BaseURL+teamPath, "audited stores of other destinations")
	})
	t.Run("verify of the default calendar alone reports the team calendar's receipt as another store's", func(t *testing.T) {
		out, err := runCommand("verify", "--server", r.env.URL(), "--caldav-url", r.srv.CollectionURL)
		if err == nil {
			t.Fatalf("verify passed:\n%s", out)
		}
		if !strings.Contains(out, "receipts name store") {
			t.Errorf("verify's report does not name the other store:\n%s", out)
		}
	})
	t.Run("serve logs the destinations it serves", func(t *testing.T) {
		out := p.out.String()
		expectLines(t, "serve's log", out, "caldav-task.v1/default at "+r.srv.CollectionURL, "caldav-task.v1/team at "+r.srv.BaseURL+teamPath)
	})
}

// holdingServer is a CalDAV server stand-in that holds every PUT until
// release PUTs are held at once, or hold has passed since the PUT came,
// then answers 201; it counts the connections open to it and the PUTs held
// at once. Any other request is answered 503, which serve takes for a
// server not answering yet. A real server cannot be made to hold its
// answers, so this one is an httptest server.
type holdingServer struct {
	*httptest.Server
	release int
	hold    time.Duration

	mu       sync.Mutex
	changed  *sync.Cond
	open     int // connections open now
	peakOpen int
	held     int // PUTs held now
	peakHeld int
	puts     int
}

func newHoldingServer(t *testing.T, release int, hold time.Duration) *holdingServer {
	t.Helper()
	h := &holdingServer{release: release, hold: hold}
	h.changed = sync.NewCond(&h.mu)
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	h.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch s {
		case http.StateNew:
			h.open++
			h.peakOpen = max(h.peakOpen, h.open)
		case http.StateClosed, http.StateHijacked:
			h.open--
		}
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func (h *holdingServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "held", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.puts++
	h.held++
	h.peakHeld = max(h.peakHeld, h.held)
	h.changed.Broadcast()
	deadline := time.Now().Add(h.hold)
	timer := time.AfterFunc(h.hold, func() {
		h.mu.Lock()
		h.changed.Broadcast()
		h.mu.Unlock()
	})
	for h.held < h.release && time.Now().Before(deadline) {
		h.changed.Wait()
	}
	timer.Stop()
	h.held--
	h.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// figures returns the peaks and the PUTs received.
func (h *holdingServer) figures() (peakOpen, peakHeld, puts int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peakOpen, h.peakHeld, h.puts
}

// executor serve bounds its connections to the CalDAV server: with 64
// approvals waiting and a server that holds every PUT until 64 are held at
// once, no more than caldav.DefaultMaxConns connections are ever open to
// it, and every approval still gets its task.
func TestServeOpensAtMostDefaultMaxConnsConnectionsToTheCalDAVServer(t *testing.T) {
	const deliveries = 2 * caldav.DefaultMaxConns
	env := testenv.Start(t)
	cand := scenario.Candidate()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seqs := make([]uint64, deliveries)
	for i := range deliveries {
		a, err := scenario.CalDAV.Generate(cand, "conns", i+1)
		if err != nil {
			t.Fatal(err)
		}
		sent, err := testenv.Publish(ctx, env.JS, a.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = sent.StreamSeq
	}
	srv := newHoldingServer(t, deliveries, 2*time.Second)

	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := &syncBuffer{}
	go func() {
		done <- run(serveCtx, []string{"serve", "--server", env.URL(), "--insecure-allow-unsigned", "--id", "exec-conns",
			"--concurrency", "256", "--call-timeout", "20s", "--ack-wait", "60s", "--log-level", "warn",
			"--task-service", "caldav", "--caldav-url", srv.URL + "/alice/tasks/"}, &bytes.Buffer{}, log)
	}()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", log.String())
		}
	}()

	byseq := awaitReceipts(t, env, seqs, 90*time.Second)
	created := 0
	for _, seq := range seqs {
		for _, rc := range byseq[seq] {
			if rc.Outcome == document.OutcomeCreated {
				created++
			}
		}
	}
	peakOpen, peakHeld, puts := srv.figures()
	t.Logf("%d approvals: %d created; the server saw %d PUTs, at most %d held at once, at most %d connections open at once",
		deliveries, created, puts, peakHeld, peakOpen)
	if peakOpen > caldav.DefaultMaxConns || peakHeld > caldav.DefaultMaxConns {
		t.Errorf("at most %d connections were open and %d PUTs held at once, want at most %d", peakOpen, peakHeld, caldav.DefaultMaxConns)
	}
	if peakHeld < caldav.DefaultMaxConns {
		t.Errorf("at most %d PUTs were held at once: the deliveries never filled the bound of %d, so the test shows nothing", peakHeld, caldav.DefaultMaxConns)
	}
	if created != deliveries {
		t.Errorf("%d created receipts, want %d", created, deliveries)
	}
	if puts < deliveries {
		t.Errorf("the server saw %d PUTs, want at least %d", puts, deliveries)
	}
}
