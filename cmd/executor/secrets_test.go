package main

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

const (
	leakedPassword = "pw-3c9e1a-for-the-real-server"
	leakedAPIKey   = "key-7b2d40-for-the-real-server"
)

// attacker stands for a machine of whoever wrote a URL into the record: it
// keeps the credentials of every request it gets and answers 404.
type attacker struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func startAttacker(t *testing.T, overTLS bool) *attacker {
	t.Helper()
	a := &attacker{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range []string{"Authorization", "X-Redmine-API-Key"} {
			if v := r.Header.Get(name); v != "" {
				a.mu.Lock()
				a.seen = append(a.seen, r.Method+" "+r.URL.Path+" "+name+": "+v)
				a.mu.Unlock()
			}
		}
		http.NotFound(w, r)
	})
	if overTLS {
		a.srv = httptest.NewTLSServer(h)
	} else {
		a.srv = httptest.NewServer(h)
	}
	t.Cleanup(a.srv.Close)
	return a
}

// forget forgets the credentials received so far.
func (a *attacker) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = nil
}

// credentials are the credentials the attacker received.
func (a *attacker) credentials() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// caFile writes the attacker's certificate to a file the client is told to
// trust (--caldav-ca-file).
func (a *attacker) caFile(t *testing.T) string {
	t.Helper()
	return writeTestFile(t, "attacker.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})))
}

// recordService writes rec as the executors' record of their task service,
// as any client may where the server has no permissions.
func recordService(t *testing.T, env *testenv.Env, rec topology.TaskService) {
	t.Helper()
	rec.By = "mallory"
	if err := topology.RecordTaskService(t.Context(), env.JS, true, 1, rec); err != nil {
		t.Fatal(err)
	}
}

// Someone who may write the record of the executors' task service names a
// machine of theirs in it. status and verify, given a password or an API
// key (a flag or the environment) and no URL of their own, send it nowhere:
// status still prints the stream's figures and says which flag to add,
// verify refuses, naming it.
func TestARecordNamingAnotherServerGetsNoPasswordOrAPIKey(t *testing.T) {
	env := testenv.Start(t)
	testenv.Ledger(t, env.JS, ledger.Options{})
	server := env.URL()
	plain, overTLS := startAttacker(t, false), startAttacker(t, true)
	passwordFile := writeTestFile(t, "password", leakedPassword+"\n")
	keyFile := writeTestFile(t, "key", leakedAPIKey+"\n")
	caldavAt := func(a *attacker, user string) topology.TaskService {
		return topology.TaskService{Kind: service.KindCalDAV, Destinations: map[string]string{"default": a.srv.URL + "/alice/tasks/"}, CalDAVUser: user}
	}
	redmineAt := topology.TaskService{Kind: service.KindRedmine, RedmineURL: plain.srv.URL + "/", RedmineProject: "ops", RedmineField: redmine.DefaultField}
	for _, c := range []struct {
		name     string
		rec      topology.TaskService
		attacker *attacker
		env      map[string]string
		args     []string
		add      string
	}{
		{"a CalDAV collection over http, with --caldav-user and $CALDAV_PASSWORD", caldavAt(plain, ""), plain,
			map[string]string{service.CalDAVPasswordEnv: leakedPassword}, []string{"--caldav-user", "alice"}, "--caldav-url URL"},
		{"a CalDAV collection over https with a certificate the client trusts", caldavAt(overTLS, ""), overTLS,
			map[string]string{service.CalDAVPasswordEnv: leakedPassword}, []string{"--caldav-user", "alice", "--caldav-ca-file", overTLS.caFile(t)}, "--caldav-url URL"},
		{"a CalDAV collection and user, with $CALDAV_PASSWORD and no flag at all", caldavAt(plain, "alice"), plain,
			map[string]string{service.CalDAVPasswordEnv: leakedPassword}, nil, "--caldav-url URL"},
		{"a CalDAV collection and user, with --caldav-password-file", caldavAt(plain, "alice"), plain,
			nil, []string{"--caldav-password-file", passwordFile}, "--caldav-url URL"},
		{"a Redmine, with $REDMINE_API_KEY", redmineAt, plain,
			map[string]string{service.RedmineAPIKeyEnv: leakedAPIKey}, nil, "--redmine-url URL"},
		{"a Redmine, with --redmine-api-key-file", redmineAt, plain,
			nil, []string{"--redmine-api-key-file", keyFile}, "--redmine-url URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(service.CalDAVPasswordEnv, c.env[service.CalDAVPasswordEnv])
			t.Setenv(service.RedmineAPIKeyEnv, c.env[service.RedmineAPIKeyEnv])
			plain.forget()
			overTLS.forget()
			recordService(t, env, c.rec)
			out, err := runCommand(append([]string{"status", "--server", server}, c.args...)...)
			t.Logf("executor status %v: %v\n%s", c.args, err, out)
			if exitCode(err) != 1 {
				t.Errorf("status ended %v (exit %d), want exit 1 with the figures it could read", err, exitCode(err))
			}
			expectLines(t, "status", out, service.RecordedName(c.rec)+" (recorded by executor mallory", "tasks:        not read (",
				"sent only to a URL given on the command line", c.add, "receipts:     created 0")
			out, err = runCommand(append([]string{"verify", "--server", server}, c.args...)...)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.add) {
				t.Errorf("verify %v: %v, want a usage error naming %s\n%s", c.args, err, c.add, out)
			}
			if got := c.attacker.credentials(); len(got) > 0 {
				t.Errorf("the record's server received credentials:\n%s", strings.Join(got, "\n"))
			}
		})
	}
	t.Run("a typed URL that is not the record's is refused, naming both", func(t *testing.T) {
		t.Setenv(service.CalDAVPasswordEnv, leakedPassword)
		plain.forget()
		recordService(t, env, caldavAt(plain, "alice"))
		typed := "https://dav.example.org/alice/tasks/"
		for _, command := range []string{"status", "verify"} {
			_, err := runCommand(command, "--server", server, "--caldav-url", typed)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), typed) || !strings.Contains(err.Error(), plain.srv.URL+"/alice/tasks/") {
				t.Errorf("%s --caldav-url %s: %v, want a usage error naming both URLs", command, typed, err)
			}
		}
		if got := plain.credentials(); len(got) > 0 {
			t.Errorf("the record's server received credentials:\n%s", strings.Join(got, "\n"))
		}
	})
}

// The URL typed on the command line answers every request with a redirect
// to another origin (another port of the same host, which net/http would
// count as the same host and send the Authorization header to). Neither
// client follows it: the password and the API key stay with the typed
// server.
func TestARedirectFromTheTypedURLKeepsTheSecret(t *testing.T) {
	env := testenv.Start(t)
	testenv.Ledger(t, env.JS, ledger.Options{})
	server := env.URL()
	other := startAttacker(t, false)
	typed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer typed.Close()
	t.Setenv(service.CalDAVPasswordEnv, leakedPassword)
	t.Setenv(service.RedmineAPIKeyEnv, leakedAPIKey)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"CalDAV", []string{"--task-service", "caldav", "--caldav-url", typed.URL + "/alice/tasks/", "--caldav-user", "alice"}},
		{"Redmine", []string{"--task-service", "redmine", "--redmine-url", typed.URL + "/", "--redmine-project", "ops"}},
	} {
		for _, command := range []string{"status", "verify"} {
			t.Run(c.name+" "+command, func(t *testing.T) {
				other.forget()
				out, err := runCommand(append([]string{command, "--server", server}, c.args...)...)
				if err == nil {
					t.Errorf("%s against a redirect succeeded:\n%s", command, out)
				}
				if got := other.credentials(); len(got) > 0 {
					t.Errorf("the redirect's target received credentials:\n%s", strings.Join(got, "\n"))
				}
			})
		}
	}
}
