package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// parseCalDAVFlags parses args as a command's task-service flags, with no
// password in the environment.
func parseCalDAVFlags(t *testing.T, args ...string) *Config {
	t.Helper()
	ts := parseTaskServiceFlags(t, args...)
	ts.getenv = func(string) string { return "" }
	return ts
}

// openCalDAVFlags checks and opens args, which must not need NATS.
func openCalDAVFlags(t *testing.T, args ...string) *Service {
	t.Helper()
	ts := parseCalDAVFlags(t, args...)
	if err := ts.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	svc, err := ts.Open(context.Background(), func() (*nats.Conn, error) {
		t.Error("opening connected to NATS")
		return nil, errors.New("no NATS here")
	}, 30*time.Second)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return svc
}

// caldavCall is a create call for intent at a CalDAV destination.
func caldavCall(intent, destination string) taskservice.Request {
	sum := sha256.Sum256([]byte(intent))
	return taskservice.Request{Scope: document.DefaultScope, IntentID: intent, RequestDigest: "sha256:" + hex.EncodeToString(sum[:]),
		RequestID: "task-request-" + intent, Task: taskservice.Task{Title: "task " + intent}, CallRef: "APPROVALS:1:1:1",
		Provider: document.ProviderCalDAV, Destination: destination}
}

func TestCalDAVDestinationFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string { return writeFileIn(t, dir, name, content) }
	const a, b, c = "http://127.0.0.1:5232/alice/tasks/", "http://127.0.0.1:5232/alice/team/", "http://127.0.0.1:5232/alice/ops/"
	destFile := file("destinations", "# the team's calendars\n\nteam "+b+"\n  ops\t"+c+"\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string // NAME=URL in order
	}{
		{"--caldav-url is the destination default", []string{"--caldav-url", a}, []string{"default=" + a}},
		{"--destination adds named collections after --caldav-url, in order", []string{"--caldav-url", a, "--destination", "team=" + b, "--destination", "ops=" + c},
			[]string{"default=" + a, "team=" + b, "ops=" + c}},
		{"--destination alone serves without a default", []string{"--destination", "team=" + b}, []string{"team=" + b}},
		{"--destination may name default", []string{"--destination", "default=" + a}, []string{"default=" + a}},
		{"--destinations-file reads NAME URL lines, skipping comments and blank lines", []string{"--caldav-url", a, "--destinations-file", destFile},
			[]string{"default=" + a, "team=" + b, "ops=" + c}},
		{"--caldav-server with --caldav-calendar is the destination default, found on that server", []string{"--caldav-server", "http://127.0.0.1:5232/", "--caldav-calendar", "Tasks", "--destination", "team=" + b},
			[]string{"default=http://127.0.0.1:5232/", "team=" + b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := parseCalDAVFlags(t, append([]string{"--task-service", "caldav"}, tc.args...)...)
			if err := ts.Check(); err != nil {
				t.Fatalf("check: %v", err)
			}
			var got []string
			for _, d := range ts.caldavDests {
				got = append(got, d.Name+"="+d.URL)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("destinations %q; want %q", got, tc.want)
			}
		})
	}
	const secret = "https://alice:s3cret-url@dav.example.org/alice/tasks/"
	for _, tc := range []struct {
		name string
		args []string
		says []string
	}{
		{"no collection at all", nil, []string{"needs a calendar collection", "--caldav-url", "--destination"}},
		{"a name given twice by --destination", []string{"--destination", "team=" + a, "--destination", "team=" + b},
			[]string{`destination "team" is already given by --destination team`}},
		{"default given by --caldav-url and by --destination", []string{"--caldav-url", a, "--destination", "default=" + b},
			[]string{`destination "default" is already given by --caldav-url`}},
		{"a name in the file that a flag gave", []string{"--destination", "team=" + a, "--destinations-file", destFile},
			[]string{destFile + ":3", `"team" is already given`}},
		{"a --destination without NAME=", []string{"--destination", a}, []string{"--destination", "want NAME=URL"}},
		{"a --destination with an empty URL", []string{"--destination", "team="}, []string{"want NAME=URL"}},
		{"a destination name in upper case", []string{"--destination", "Team=" + a}, []string{"destination name", "lower-case", "--destination (number 1)"}},
		{"a destination name that starts with a digit", []string{"--destination", "1st=" + a}, []string{"starting with a letter"}},
		{"a file line with one field", []string{"--destinations-file", file("one-field", "# x\nteam\n")}, []string{"one-field:2", "want NAME URL"}},
		{"a file line with three fields", []string{"--destinations-file", file("three", "team "+a+" extra\n")}, []string{"three:1", "found 3"}},
		{"a file that does not exist", []string{"--destinations-file", filepath.Join(dir, "missing")}, []string{"--destinations-file", "missing"}},
		{"--caldav-calendar without --caldav-server", []string{"--caldav-calendar", "Tasks", "--destination", "team=" + b}, []string{"--caldav-calendar needs --caldav-server"}},
		{"--caldav-calendar with --caldav-url, the collection", []string{"--caldav-url", a, "--caldav-calendar", "Tasks"}, []string{"--caldav-url gives its collection", "give one", "--caldav-server"}},
		{"--caldav-calendar with both --caldav-url and --caldav-server", []string{"--caldav-url", a, "--caldav-server", a, "--caldav-calendar", "Tasks"}, []string{"--caldav-url gives its collection"}},
		{"--caldav-server without --caldav-calendar", []string{"--caldav-server", a}, []string{"--caldav-server needs --caldav-calendar", "use --caldav-url"}},
		{"--caldav-server with a password in its URL, not echoed", []string{"--caldav-server", secret, "--caldav-calendar", "Tasks"}, []string{"--caldav-server with --caldav-calendar", "must not carry a user or password"}},
		{"a --caldav-ca-file that holds no certificate", []string{"--caldav-url", a, "--caldav-ca-file", file("not-pem", "hello\n")}, []string{"--caldav-ca-file", "no PEM certificate"}},
		{"a --caldav-ca-file that does not exist", []string{"--caldav-url", a, "--caldav-ca-file", filepath.Join(dir, "no-ca")}, []string{"--caldav-ca-file"}},
		{"a --destination URL with a password, not echoed", []string{"--destination", "team=" + secret}, []string{"--destination team", "must not carry a user or password"}},
		{"a --destination of a URL with a password and no NAME=, not echoed", []string{"--destination", strings.Replace(secret, "tasks/", "tasks/?x", 1)}, []string{"want NAME=URL"}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			ts := parseCalDAVFlags(t, append([]string{"--task-service", "caldav"}, tc.args...)...)
			err := ts.Check()
			if !errors.Is(err, cli.ErrUsage) {
				t.Fatalf("check: %v; want a usage error", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q: %v", s, err)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	t.Run("the flag --destinations, one letter from --destination, is no longer known", func(t *testing.T) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		FlagsVar(fs)
		if err := fs.Parse([]string{"--destinations", destFile}); err == nil || !strings.Contains(err.Error(), "-destinations") {
			t.Errorf("parse: %v; want the flag refused", err)
		}
	})
	for _, args := range [][]string{
		{"--destination", "team=" + b},
		{"--destinations-file", destFile},
		{"--caldav-calendar", "Tasks"},
		{"--caldav-server", a},
		{"--caldav-ca-file", destFile},
	} {
		t.Run(args[0]+" with the fake service is refused", func(t *testing.T) {
			err := parseCalDAVFlags(t, append([]string{"--task-service", "fake"}, args...)...).Check()
			if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "need --task-service caldav") {
				t.Errorf("check: %v; want a usage error saying the flag needs caldav", err)
			}
		})
	}
}

func TestEachKindServesItsProvidersDestinations(t *testing.T) {
	t.Run("the fake service serves the fake provider's default destination", func(t *testing.T) {
		svc, err := parseCalDAVFlags(t).Open(context.Background(), func() (*nats.Conn, error) { return nil, nil }, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if want := []gate.Destination{executor.FakeDefault}; !slices.Equal(svc.Serves, want) {
			t.Errorf("serves %v; want %v", svc.Serves, want)
		}
	})
	t.Run("Redmine serves the Redmine provider's default destination", func(t *testing.T) {
		env := testenv.Start(t)
		ts := parseRedmineTS(t, map[string]string{RedmineAPIKeyEnv: redmineKey}, redmineArgs...)
		if err := ts.Check(); err != nil {
			t.Fatal(err)
		}
		ts.ProvisionLedger, ts.LedgerReplicas = true, 1
		svc, err := ts.Open(context.Background(), func() (*nats.Conn, error) { return env.NC, nil }, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := []gate.Destination{{Provider: document.ProviderRedmine, Name: document.DefaultDestination}}
		if !slices.Equal(svc.Serves, want) || svc.Provider != document.ProviderRedmine || svc.Destination != "default" {
			t.Errorf("serves %v, target for %s/%s; want %v", svc.Serves, svc.Provider, svc.Destination, want)
		}
	})
	t.Run("CalDAV serves each destination given, and the probe's requests name the default one", func(t *testing.T) {
		svc := openCalDAVFlags(t, "--task-service", "caldav", "--destination", "team=http://127.0.0.1:1/team/", "--caldav-url", "http://127.0.0.1:1/tasks/")
		want := []gate.Destination{{Provider: document.ProviderCalDAV, Name: "default"}, {Provider: document.ProviderCalDAV, Name: "team"}}
		if !slices.Equal(svc.Serves, want) {
			t.Errorf("serves %v; want %v", svc.Serves, want)
		}
		if svc.Provider != document.ProviderCalDAV || svc.Destination != "default" || !strings.Contains(svc.Name, "http://127.0.0.1:1/tasks/") {
			t.Errorf("the target is %q for %s/%s; want the default collection", svc.Name, svc.Provider, svc.Destination)
		}
	})
	t.Run("CalDAV without a default: the probe's requests name the first destination given", func(t *testing.T) {
		svc := openCalDAVFlags(t, "--task-service", "caldav", "--destination", "team=http://127.0.0.1:1/team/", "--destination", "ops=http://127.0.0.1:1/ops/")
		if svc.Destination != "team" || !strings.Contains(svc.Name, "/team/") {
			t.Errorf("the target is %q for destination %s; want team's", svc.Name, svc.Destination)
		}
	})
}

// calDAVStub answers as a task calendar at every path: PROPFIND says it is
// a calendar that supports VTODO, REPORT lists no task, PUT creates after
// hold. It counts requests by method and path.
type calDAVStub struct {
	hold func()
	mu   sync.Mutex
	seen map[string]int
}

func (s *calDAVStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[r.Method+" "+r.URL.Path]++
	s.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	switch r.Method {
	case http.MethodPut:
		if s.hold != nil {
			s.hold()
		}
		w.WriteHeader(http.StatusCreated)
	case "PROPFIND":
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(http.StatusMultiStatus)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?>
<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:response><d:href>%s</d:href><d:propstat><d:prop>
<d:resourcetype><d:collection/><c:calendar/></d:resourcetype>
<c:supported-calendar-component-set><c:comp name="VTODO"/></c:supported-calendar-component-set>
<d:displayname>Tasks</d:displayname></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>`, r.URL.Path)
	case "REPORT":
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(http.StatusMultiStatus)
		fmt.Fprint(w, `<?xml version="1.0" encoding="utf-8"?><d:multistatus xmlns:d="DAV:"/>`)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *calDAVStub) count(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[method+" "+path]
}

// Two destinations on one server share one bounded transport: 80 creates
// sent at once, 40 to each calendar, hold at most caldav.DefaultMaxConns
// connections to the server between them, not that many per calendar.
func TestCalDAVDestinationsOnOneServerShareOneConnectionBound(t *testing.T) {
	var inFlight, peak, conns atomic.Int32
	stub := &calDAVStub{hold: func() {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		inFlight.Add(-1)
	}}
	srv := httptest.NewUnstartedServer(stub)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	svc := openCalDAVFlags(t, "--task-service", "caldav", "--caldav-url", srv.URL+"/alice/tasks/", "--destination", "team="+srv.URL+"/alice/team/")

	const perDestination = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*perDestination)
	for i := range perDestination {
		for _, d := range []string{"default", "team"} {
			wg.Go(func() {
				if _, err := svc.Service.Create(context.Background(), caldavCall(fmt.Sprintf("intent-%s-%03d", d, i), d)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Create: %v", err)
	}
	if p := int(peak.Load()); p != caldav.DefaultMaxConns {
		t.Errorf("the server saw %d PUTs at once; want %d, the bound for the server, shared by its calendars", p, caldav.DefaultMaxConns)
	}
	if n := int(conns.Load()); n > caldav.DefaultMaxConns {
		t.Errorf("the executor opened %d connections to the server; want at most %d", n, caldav.DefaultMaxConns)
	}
	for _, path := range []string{"/alice/tasks/", "/alice/team/"} {
		n := 0
		for i := range perDestination {
			name, _ := caldav.ResourceName(fmt.Sprintf("intent-%s-%03d", map[string]string{"/alice/tasks/": "default", "/alice/team/": "team"}[path], i))
			n += stub.count(http.MethodPut, path+name)
		}
		if n != perDestination {
			t.Errorf("%s received %d of its %d PUTs", path, n, perDestination)
		}
	}
}

func TestCalDAVReachChecksEveryDestination(t *testing.T) {
	stub := &calDAVStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	svc := openCalDAVFlags(t, "--task-service", "caldav", "--caldav-url", srv.URL+"/alice/tasks/", "--destination", "team="+srv.URL+"/alice/team/")
	if err := svc.Reach(context.Background()); err != nil {
		t.Fatalf("Reach: %v", err)
	}
	for _, path := range []string{"/alice/tasks/", "/alice/team/"} {
		if n := stub.count("REPORT", path); n != 1 {
			t.Errorf("%s was read %d times; want once", path, n)
		}
	}
	t.Run("a destination the server refuses stops reach, naming it", func(t *testing.T) {
		svc := openCalDAVFlags(t, "--task-service", "caldav", "--caldav-url", srv.URL+"/alice/tasks/", "--destination", "gone="+srv.URL+"/nowhere/")
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/nowhere/") {
				http.NotFound(w, r)
				return
			}
			stub.ServeHTTP(w, r)
		})
		err := svc.Reach(context.Background())
		if err == nil || !strings.Contains(err.Error(), "destination gone (--destination gone)") || !taskservice.IsPermanent(err) {
			t.Errorf("Reach: %v; want a permanent error naming destination gone", err)
		}
	})
	t.Run("a wrong destination after one that fails for now is still named, and the error is permanent", func(t *testing.T) {
		svc := openCalDAVFlags(t, "--task-service", "caldav", "--caldav-url", srv.URL+"/alice/busy/", "--destination", "gone="+srv.URL+"/nowhere/")
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/alice/busy/"):
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
			case strings.HasPrefix(r.URL.Path, "/nowhere/"):
				http.NotFound(w, r)
			default:
				stub.ServeHTTP(w, r)
			}
		})
		err := svc.Reach(context.Background())
		if err == nil || !strings.Contains(err.Error(), "destination default (--caldav-url)") ||
			!strings.Contains(err.Error(), "destination gone (--destination gone)") || !taskservice.IsPermanent(err) {
			t.Errorf("Reach: %v; want a permanent error naming both destinations", err)
		}
	})
}

// A server whose certificate no system root signs is refused until
// --caldav-ca-file names the certificate.
func TestCalDAVCAFileTrustsASelfSignedServer(t *testing.T) {
	stub := &calDAVStub{}
	srv := httptest.NewTLSServer(stub)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		created bool
	}{
		{"without --caldav-ca-file the server's certificate is refused", nil, false},
		{"with --caldav-ca-file naming it the task is created", []string{"--caldav-ca-file", ca}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intent := fmt.Sprintf("intent-tls-%t", tc.created)
			svc := openCalDAVFlags(t, append([]string{"--task-service", "caldav", "--caldav-url", srv.URL + "/alice/tasks/"}, tc.args...)...)
			res, err := svc.Service.Create(context.Background(), caldavCall(intent, "default"))
			name, _ := caldav.ResourceName(intent)
			got := stub.count(http.MethodPut, "/alice/tasks/"+name)
			if tc.created {
				if err != nil || res.Outcome != taskservice.Created || got != 1 {
					t.Fatalf("Create: %+v, %v, %d PUTs received; want created, one PUT", res, err, got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "certificate") || got != 0 {
				t.Fatalf("Create: %+v, %v, %d PUTs received; want a certificate error and no PUT", res, err, got)
			}
		})
	}
}

// --caldav-calendar finds the calendar by its display name on the server
// given by --caldav-server (a real Radicale with a login), and the tasks of
// destination default go there; a name no task calendar has is refused at
// open, and a collection that holds only events is refused by reach.
func TestCalDAVCalendarIsFoundByItsName(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: "alice", Password: "s3cret"})
	srv.MakeCalendar(srv.HomePath+"work/", "Work", "VTODO")
	srv.MakeCalendar(srv.HomePath+"events/", "Events", "VEVENT")
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := []string{"--task-service", "caldav", "--caldav-user", "alice", "--caldav-password-file", pw}
	work := srv.BaseURL + srv.HomePath + "work/"

	t.Run("the calendar named Work is destination default", func(t *testing.T) {
		svc := openCalDAVFlags(t, append(login, "--caldav-server", srv.BaseURL, "--caldav-calendar", "Work")...)
		if svc.Destination != "default" || svc.Name != "CalDAV collection "+work {
			t.Fatalf("found %q for destination %s; want %s", svc.Name, svc.Destination, work)
		}
		if err := svc.Reach(context.Background()); err != nil {
			t.Fatalf("Reach: %v", err)
		}
		res, err := svc.Service.Create(context.Background(), caldavCall("intent-found-1", "default"))
		name, _ := caldav.ResourceName("intent-found-1")
		if err != nil || res.Outcome != taskservice.Created || srv.Creates(srv.HomePath+"work/"+name) != 1 {
			t.Fatalf("Create: %+v, %v; want created in %s", res, err, work)
		}
	})
	t.Run("a name that no calendar accepting tasks has is refused at open", func(t *testing.T) {
		ts := parseCalDAVFlags(t, append(login, "--caldav-server", srv.BaseURL, "--caldav-calendar", "Events")...)
		if err := ts.Check(); err != nil {
			t.Fatal(err)
		}
		_, err := ts.Open(context.Background(), nil, 10*time.Second)
		if !errors.Is(err, caldav.ErrNoCalendar) || !strings.Contains(err.Error(), "--caldav-calendar") {
			t.Fatalf("open: %v; want caldav.ErrNoCalendar naming --caldav-calendar", err)
		}
	})
	t.Run("a destination that holds only events is refused by reach, permanently, naming it", func(t *testing.T) {
		svc := openCalDAVFlags(t, append(login, "--destination", "team="+work, "--destination", "ev="+srv.BaseURL+srv.HomePath+"events/")...)
		err := svc.Reach(context.Background())
		if !errors.Is(err, caldav.ErrNotTaskCalendar) || !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), "destination ev") {
			t.Fatalf("Reach: %v; want a permanent caldav.ErrNotTaskCalendar naming destination ev", err)
		}
	})
}
