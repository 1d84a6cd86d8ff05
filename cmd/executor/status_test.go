package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// sendSeedCreated sends the seed's original request and fails the test
// unless its receipt says created.
func sendSeedCreated(t *testing.T, env *testenv.Env) {
	t.Helper()
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent, err := testenv.Publish(ctx, env.JS, s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	if rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("receipt %s, want created", rc.Outcome)
	}
}

// stackWithOneCreatedReceipt starts a stack, has an executor carry out the
// seed approval once and stops the executor.
func stackWithOneCreatedReceipt(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.Start(t)
	_, stop := env.Executor(executor.Config{ID: "exec-1"})
	sendSeedCreated(t, env)
	stop()
	return env
}

func TestStatusPrintsTheCountersTheConsumerAndTheReceipts(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut); err != nil {
		t.Fatalf("status: %v\n%s%s", err, out.String(), errOut.String())
	}
	info, err := env.Service.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	expectLines(t, "status", out.String(),
		"task service: requests received 1, creates executed 1, tasks existing 1",
		"keys:         live 1, compacted 0; tasks deleted 0; records retired 0",
		fmt.Sprintf("store:        %s, answered by instance %s on host %s, pid %d", info.StoreID, info.Instance, info.Host, info.PID),
		"consumer:     pending 0, ack pending 0",
		"receipts:     created 1 replayed 0")
	out.Reset()
	if err := run(context.Background(), []string{"status", "--server", env.URL(), "--json"}, &out, &errOut); err != nil {
		t.Fatalf("status --json: %v\n%s", err, errOut.String())
	}
	var rep service.StatusReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Store == nil || rep.Store.ID != info.StoreID ||
		rep.Store.PID != info.PID || rep.Keys == nil || len(rep.Scopes) != 1 || rep.Scopes[0].Scope != "default" {
		t.Errorf("status --json: %s, %v; want the store, the keys and the one scope", out.String(), err)
	}
}

func TestStatusShowsTheKeysAndEachScopesCountersWhenThereIsMoreThanOneScope(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	status := func(t *testing.T) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut); err != nil {
			t.Fatalf("status: %v\n%s%s", err, out.String(), errOut.String())
		}
		return out.String()
	}
	t.Run("with one scope, the keys and no scope lines", func(t *testing.T) {
		out := status(t)
		if !strings.Contains(out, "keys:         live 1, compacted 0; tasks deleted 0") || strings.Contains(out, "  scope ") {
			t.Errorf("status with one scope:\n%s", out)
		}
	})
	t.Run("with two scopes and a deleted task, each scope's counters", func(t *testing.T) {
		env.Executor(executor.Config{ID: "exec-1"})
		s := testenv.Seed(t)
		teamB, err := s.InScope(s.Original, "team-b")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sent, err := testenv.Publish(ctx, env.JS, teamB.Envelope())
		if err != nil {
			t.Fatal(err)
		}
		rc, err := testenv.WaitReceipt(ctx, env.JS, sent.Scope, sent.IntentID, sent.StreamSeq)
		if err != nil || rc.Outcome != document.OutcomeCreated {
			t.Fatalf("team-b's receipt %+v, %v; want created", rc, err)
		}
		if _, err := env.Service.Delete(ctx, provider.DeleteRequest{Scope: "team-b", IntentID: "intent-0001"}); err != nil {
			t.Fatal(err)
		}
		out := status(t)
		expectLines(t, "status", out,
			"task service: requests received 2, creates executed 2, tasks existing 1",
			"keys:         live 2, compacted 0; tasks deleted 1",
			"  scope default: requests received 1, creates executed 1, tasks existing 1; keys live 1, compacted 0; tasks deleted 0",
			"  scope team-b: requests received 1, creates executed 1, tasks existing 0; keys live 1, compacted 0; tasks deleted 1",
		)
	})
}

func TestStatusWithTheTaskServiceDownStillShowsTheStreamAndConsumerFigures(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	t.Run("as text, and the exit status is 1", func(t *testing.T) {
		var out, errOut bytes.Buffer
		start := time.Now()
		err := run(context.Background(), []string{"status", "--server", env.URL()}, &out, &errOut)
		if exitCode(err) != 1 || !errors.Is(err, errSilent) {
			t.Fatalf("status ended with %v (exit %d), want exit 1 with the explanation already printed", err, exitCode(err))
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("status took %s with the service down", took)
		}
		expectLines(t, "status", out.String(),
			"task service: did not answer (",
			"its counters are unknown",
			"consumer:     pending 0, ack pending 0",
			"receipts:     created 1 replayed 0")
	})
	t.Run("as JSON, the counters are null and the service error says why", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"status", "--server", env.URL(), "--json"}, &out, &errOut)
		if exitCode(err) != 1 {
			t.Fatalf("status --json ended with %v, want exit 1", err)
		}
		var rep map[string]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("status --json printed %q: %v", out.String(), err)
		}
		if string(rep["counts"]) != "null" {
			t.Errorf("counts = %s, want null", rep["counts"])
		}
		var why string
		if err := json.Unmarshal(rep["service_error"], &why); err != nil || why == "" {
			t.Errorf("service_error = %s, want the reason", rep["service_error"])
		}
		var consumer struct {
			Pending    *uint64 `json:"pending"`
			AckPending *int    `json:"ack_pending"`
		}
		if err := json.Unmarshal(rep["consumer"], &consumer); err != nil || consumer.Pending == nil || consumer.AckPending == nil {
			t.Errorf("consumer = %s, want its figures", rep["consumer"])
		}
		var receipts map[string]int64
		if err := json.Unmarshal(rep["receipts"], &receipts); err != nil || receipts[document.OutcomeCreated] != 1 {
			t.Errorf("receipts = %s, want one created", rep["receipts"])
		}
	})
}

func TestStatusRefusesANonPositiveServiceTimeout(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"status", "--server", "nats://127.0.0.1:1", "--service-timeout", "0s"}, &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--service-timeout must be positive") {
		t.Fatalf("status --service-timeout 0s: %v, want a usage error naming the flag", err)
	}
}

func TestStatusGivesUpOnATaskServiceThatTakesTheCallButNeverAnswers(t *testing.T) {
	env := stackWithOneCreatedReceipt(t)
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	// Something takes the stats call and never answers.
	sub, err := env.NC.Subscribe(provider.SubjectStats, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	err = run(context.Background(), []string{"status", "--server", env.URL(), "--service-timeout", "300ms"}, &out, &errOut)
	took := time.Since(start)
	if exitCode(err) != 1 || !strings.Contains(out.String(), "task service: did not answer") {
		t.Fatalf("status ended with %v:\n%s", err, out.String())
	}
	if took > 5*time.Second {
		t.Errorf("status took %s; --service-timeout 300ms should bound the wait", took)
	}
	if !strings.Contains(out.String(), "receipts:     created 1") {
		t.Errorf("status lacks the receipts:\n%s", out.String())
	}
}

// runCommand runs one executor command in this process and returns what it
// printed (stdout, then stderr) and how it ended.
func runCommand(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errOut, err := runCLI(ctx, args...)
	return out + errOut, err
}

// serve records the CalDAV collection it calls; plain executor status and
// executor verify name it, ask for the collection's URL and the password
// (never recorded, and sent only to a URL on the command line) with the
// command line to run, audit it once given both, and refuse flags that
// name another service.
func TestStatusAndVerifyUseTheTaskServiceServeRecorded(t *testing.T) {
	const user, password = "alice", "pw-5e1b77-not-for-print"
	t.Setenv(service.CalDAVPasswordEnv, "")
	s := testenv.SeedFor(t, scenario.CalDAV)
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: password})
	r := newDAVRig(t, srv)
	pwFile := writeTestFile(t, "password", password+"\n")
	r.executor(t, srv.CollectionURL, "exec-1", "--caldav-user", user, "--caldav-password-file", pwFile)
	rc := r.send(t, s.Original.Envelope())
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the seed approval: %s, want created", rc.Outcome)
	}
	// One task in the demo's scope and one in the probe's, titled as
	// theirs, made under the deployment's mark key as a probe run against
	// the deployment's NATS makes its tasks.
	for _, m := range []struct{ scope, intent, title string }{
		{audit.DemoScope, "demo-0a1b2c-intent-0002", audit.DemoTitlePrefix + "left"},
		{probe.Scope, "probe-0a1b2c-retry", probe.TitlePrefix + "left"},
	} {
		createUnderMarkKey(t, r, user, password, m.scope, m.intent, m.title)
	}
	server := r.env.URL()
	// withPassword runs command with the collection's URL and the password
	// file; it fails the test unless the command succeeds without printing
	// the password.
	withPassword := func(t *testing.T, command string) string {
		t.Helper()
		out, err := runCommand(command, "--server", server, "--caldav-url", srv.CollectionURL, "--caldav-password-file", pwFile)
		t.Logf("executor %s --caldav-url URL --caldav-password-file FILE:\n%s", command, out)
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		if strings.Contains(out, password) {
			t.Errorf("%s prints the password", command)
		}
		return out
	}
	recorded := "task service: caldav, CalDAV collection " + srv.CollectionURL + " (recorded by executor exec-1 at "

	t.Run("the record names the collection and the user, never the password", func(t *testing.T) {
		raw := rawServiceRecord(t, r.env)
		if !strings.Contains(raw, srv.CollectionURL) || !strings.Contains(raw, `"caldav_user":"alice"`) || strings.Contains(raw, password) {
			t.Errorf("the record %s", raw)
		}
	})

	t.Run("status without flags names the recorded collection and says which flags the password needs", func(t *testing.T) {
		out, err := runCommand("status", "--server", server)
		t.Logf("executor status, no password:\n%s", out)
		if exitCode(err) != 1 {
			t.Errorf("status without the password ended %v (exit %d), want exit 1", err, exitCode(err))
		}
		expectLines(t, "status", out,
			recorded, "tasks:        not read (", "add --caldav-url URL and --caldav-password-file FILE (or set $CALDAV_PASSWORD), as in: executor status --server "+server+" --caldav-url URL --caldav-password-file FILE",
			"receipts:     created 1 replayed 0")
		if strings.Contains(out, "requests received 0") {
			t.Errorf("status shows the idle fake service's counters:\n%s", out)
		}
	})
	t.Run("status with the URL and the password file lists the collection's tasks, the probe's and the demo's apart", func(t *testing.T) {
		out := withPassword(t, "status")
		expectLines(t, "status", out,
			recorded,
			"tasks:        3 carrying an intent id: 1 of the pipeline; left by the probe 1, by the demo 1; 3 items in all",
			"receipts:     created 1 replayed 0")
		js, err := runCommand("status", "--server", server, "--caldav-url", srv.CollectionURL, "--caldav-password-file", pwFile, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep service.StatusReport
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, js)
		}
		if rep.TaskService == nil || rep.TaskService.Kind != "caldav" || rep.TaskService.From != "record" || rep.TaskService.RecordedBy != "exec-1" ||
			rep.Tasks == nil || rep.Tasks.Pipeline != 1 || rep.Tasks.Left[audit.DemoScope] != 1 || rep.Counts != nil {
			t.Errorf("status --json: %s", js)
		}
	})
	t.Run("verify without flags says which flags to add and the command to run", func(t *testing.T) {
		out, err := runCommand("verify", "--server", server)
		t.Logf("executor verify, no password: %v\n%s", err, out)
		if !errors.Is(err, errUsage) {
			t.Fatalf("verify without the password: %v, want a usage error", err)
		}
		expectLines(t, "the error", err.Error(),
			"the executors call the CalDAV collection "+srv.CollectionURL+" as user alice",
			"add --caldav-url URL and --caldav-password-file FILE (or set $CALDAV_PASSWORD), as in: executor verify --server "+server+" --caldav-url URL --caldav-password-file FILE")
	})
	t.Run("verify with the URL and the password file audits the recorded collection and lists the probe's and the demo's tasks apart", func(t *testing.T) {
		expectLines(t, "verify", withPassword(t, "verify"),
			"task service: store "+caldavStore(t, srv.CollectionURL)+", CalDAV collection "+srv.CollectionURL,
			"tasks:        3 carrying an intent id: 1 of the pipeline; left by the probe 1, by the demo 1; 3 items in all",
			"of which left by the demo (scope sendtwice-demo; excluded)", "left by the demo", "verify: all checks hold")
	})
	t.Run("a second task for one key in the demo's scope, stored by hand, is still reported, as not the pipeline's", func(t *testing.T) {
		path := srv.ResourcePath("demo-again.ics")
		todo := bytes.Replace(markedTodo(audit.DemoScope, "demo-0a1b2c-intent-0002", "again"), []byte("UID:"), []byte("UID:again-"), 1)
		if code := srv.Put(path, todo); code != http.StatusCreated {
			t.Fatalf("PUT %s answered %d", path, code)
		}
		defer srv.Do(http.MethodDelete, path, nil)
		out, err := runCommand("verify", "--server", server, "--caldav-url", srv.CollectionURL, "--caldav-password-file", pwFile)
		if err == nil || !strings.Contains(out, "FAIL 16. listed-tasks-proven:") ||
			!strings.Contains(out, `! task again-sendtwice-demo-demo-0a1b2c-intent-0002 at `+path+` in CalDAV collection `+srv.CollectionURL+` claims intent "demo-0a1b2c-intent-0002" in scope "sendtwice-demo" but is not the pipeline's`) {
			t.Errorf("verify with a second task for one demo key: %v\n%s", err, violationLines(out))
		}
	})
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"another kind of service is refused, naming both", []string{"--task-service", "fake"},
			[]string{"--task-service fake", "the CalDAV collection " + srv.CollectionURL}},
		{"another collection is refused, naming both", []string{"--task-service", "caldav", "--caldav-url", srv.BaseURL + "/bob/tasks/", "--caldav-user", user, "--caldav-password-file", pwFile},
			[]string{"--caldav-url " + srv.BaseURL + "/bob/tasks/", "the CalDAV collection " + srv.CollectionURL}},
	} {
		for _, command := range []string{"status", "verify"} {
			t.Run(command+": "+c.name, func(t *testing.T) {
				out, err := runCommand(append([]string{command, "--server", server}, c.args...)...)
				if !errors.Is(err, errUsage) {
					t.Fatalf("%s %v: %v, want a usage error\n%s", command, c.args, err, out)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error %q does not name %q", err, w)
					}
				}
			})
		}
	}
	t.Run("a contradicting URL's secret is not shown in the refusal", func(t *testing.T) {
		const secret = "tok-9d1c-not-for-print"
		for _, command := range []string{"status", "verify"} {
			out, err := runCommand(command, "--server", server, "--caldav-url", srv.BaseURL+"/bob/tasks/?token="+secret)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--caldav-url") {
				t.Fatalf("%s: %v, want a usage error naming --caldav-url\n%s", command, err, out)
			}
			if strings.Contains(err.Error()+out, secret) {
				t.Errorf("%s shows the URL's secret: %v\n%s", command, err, out)
			}
		}
	})
	t.Run("the flags the executors were given agree with the record", func(t *testing.T) {
		out, err := runCommand("verify", "--server", server, "--task-service", "caldav", "--caldav-url", srv.CollectionURL, "--caldav-user", user, "--caldav-password-file", pwFile)
		if err != nil {
			t.Errorf("verify with the executors' own flags: %v\n%s", err, violationLines(out))
		}
	})
}

// caldavStore is the store id of the collection at u.
func caldavStore(t *testing.T, u string) string {
	t.Helper()
	a, err := caldav.New(caldav.Config{CollectionURL: u})
	if err != nil {
		t.Fatal(err)
	}
	return a.StoreID()
}

// serve --embedded with --task-service caldav runs the NATS server alone:
// the fake task service is not started and its store is neither opened
// nor made; plain status reads the collection.
func TestServeEmbeddedWithCalDAVOpensNoFakeServiceStore(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	p := serveEmbedded(t, "--insecure-allow-unsigned", "--id", "exec-embedded", "--task-service", "caldav", "--caldav-url", srv.CollectionURL)
	data, url := p.data, p.url
	p.awaitConsuming(t, 60*time.Second)
	t.Run("no store directory of the fake service is made", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(data, "provider")); !errors.Is(err, os.ErrNotExist) {
			entries, _ := os.ReadDir(data)
			t.Errorf("the fake service's store %s: %v (data holds %v)", filepath.Join(data, "provider"), err, entries)
		}
	})
	t.Run("no fake task service answers", func(t *testing.T) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		c := provider.NewClient(nc)
		c.Timeout = 2 * time.Second
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		if info, err := c.Info(cctx); err == nil {
			t.Errorf("a fake task service answered: %+v", info)
		}
	})
	t.Run("plain status reads the collection", func(t *testing.T) {
		out, err := runCommand("status", "--server", url)
		t.Logf("executor status:\n%s", out)
		want := "task service: caldav, CalDAV collection " + srv.CollectionURL + " (recorded by executor exec-embedded at "
		if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "tasks:        0 carrying an intent id") {
			t.Errorf("status: %v, want %q", err, want)
		}
	})
}

// recordBucket opens js's bucket of the deployment's record: what
// provisioning applied and the executors' task service.
func recordBucket(ctx context.Context, t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(ctx, topology.RecordBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// rawServiceRecord is the record of the executors' task service as stored.
func rawServiceRecord(t *testing.T, env *testenv.Env) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := recordBucket(ctx, t, env.JS).Get(ctx, topology.TaskServiceKey)
	if err != nil {
		t.Fatalf("no record of the task service: %v", err)
	}
	return string(e.Value())
}

// serve records the Redmine project it calls; plain status lists its
// issues once given Redmine's URL and the API key, which is never recorded
// and goes only to a URL on the command line, and plain verify asks for
// both with the command line to run.
func TestStatusAndVerifyUseTheRedmineProjectServeRecorded(t *testing.T) {
	redminetest.Require(t)
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	r.executor(t, r.srv.URL, "exec-1", patient...)
	if rc := sendAndWait(t, r.env, s.Original.Envelope()); rc.Outcome != document.OutcomeCreated {
		t.Fatalf("the seed approval: %s, want created", rc.Outcome)
	}
	t.Setenv(service.RedmineAPIKeyEnv, "")
	server := r.env.URL()
	if raw := rawServiceRecord(t, r.env); strings.Contains(raw, r.srv.APIKey) || !strings.Contains(raw, r.srv.Project) {
		t.Errorf("the record %s", raw)
	}
	recorded := "task service: redmine, Redmine project " + r.srv.Project + " at "

	t.Run("status without the API key names the project and the flags to add", func(t *testing.T) {
		out, err := runCommand("status", "--server", server)
		t.Logf("executor status, no API key:\n%s", out)
		if exitCode(err) != 1 || !strings.Contains(out, recorded) ||
			!strings.Contains(out, "its API key is never recorded, and is sent only to a URL given on the command line: add --redmine-url URL and --redmine-api-key-file FILE (or set $REDMINE_API_KEY), as in: executor status --server "+server+" --redmine-url URL --redmine-api-key-file FILE") {
			t.Errorf("status without the API key: %v", err)
		}
	})
	t.Run("status with the URL and the API key file lists the project's issues", func(t *testing.T) {
		out, err := runCommand("status", "--server", server, "--redmine-url", r.srv.URL, "--redmine-api-key-file", r.keyFile)
		t.Logf("executor status --redmine-url URL --redmine-api-key-file FILE:\n%s", out)
		if err != nil || !strings.Contains(out, recorded) || !strings.Contains(out, "tasks:        1 carrying an intent id: 1 of the pipeline; left by the probe 0, by the demo 0") {
			t.Errorf("status: %v", err)
		}
		if strings.Contains(out, r.srv.APIKey) {
			t.Errorf("status prints the API key")
		}
	})
	t.Run("verify without the API key says which flags to add", func(t *testing.T) {
		_, err := runCommand("verify", "--server", server)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "as in: executor verify --server "+server+" --redmine-url URL --redmine-api-key-file FILE") {
			t.Errorf("verify without the API key: %v", err)
		}
	})
	t.Run("verify with the URL and the API key file audits the recorded project", func(t *testing.T) {
		out, err := runCommand("verify", "--server", server, "--redmine-url", r.srv.URL, "--redmine-api-key-file", r.keyFile)
		if err != nil || !strings.Contains(out, "verify: all checks hold") {
			t.Errorf("verify: %v\n%s", err, violationLines(out))
		}
	})
	t.Run("another project is refused, naming both", func(t *testing.T) {
		_, err := runCommand("verify", "--server", server, "--redmine-api-key-file", r.keyFile, "--task-service", "redmine",
			"--redmine-url", r.srv.URL, "--redmine-project", "another-project")
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--redmine-project another-project") || !strings.Contains(err.Error(), "Redmine project "+r.srv.Project) {
			t.Errorf("verify of another project: %v", err)
		}
	})
}

// With --task-service caldav, serve --embedded starts no fake task service:
// the flags that would configure it are refused, naming them, before
// anything starts.
func TestServeEmbeddedWithCalDAVRefusesTheFakeServicesFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"a key margin is refused", []string{"--key-margin", "1m"}},
		{"a records retention is refused", []string{"--records-retention", "1h"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--embedded", "--insecure-allow-unsigned", "--data", data, "--listen", "127.0.0.1:0",
				"--task-service", "caldav", "--caldav-url", "http://127.0.0.1:1/alice/tasks/"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := run(ctx, args, &bytes.Buffer{}, &bytes.Buffer{})
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.args[0]) || !strings.Contains(err.Error(), "--task-service caldav") {
				t.Fatalf("%v: %v, want a usage error naming %s and --task-service caldav", c.args, err, c.args[0])
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused command made its data directory: %v", err)
			}
		})
	}
}

func TestVerifyCommandFailsOnADirectCreateUnlessCallsFromOutsideAreAllowed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := demo.SendAndWait(ctx, env.JS, s.Original.Envelope(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A create for an intent no approval names.
	env.CreateDirectly(s.NewIntent.Envelope(), "intent-outside", "")

	out, errOut, err := runCLI(context.Background(), "verify", "--server", env.URL())
	if err == nil {
		t.Fatalf("verify passed after a direct create:\n%s", out)
	}
	expectLines(t, "the report", out, "window: APPROVALS sequences 1 to 1, 1 messages", "FAIL 7.", "came from outside the executors")
	// No executor ran serve here, so nothing recorded the service: verify
	// says that it takes the fake one.
	if want := "no record of the executors' task service"; !strings.Contains(errOut, want) {
		t.Errorf("verify without a record does not say %q:\n%s", want, errOut)
	}

	out, errOut, err = runCLI(context.Background(), "verify", "--server", env.URL(), "--allow-external", "1", "--json")
	if err != nil {
		t.Fatalf("verify --allow-external 1: %v\n%s%s", err, out, errOut)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Window.FirstSeq != 1 || rep.Window.LastSeq != 1 || rep.Window.Messages != 1 || len(rep.Checks) != 15 ||
		rep.Service.StoreID != env.Stack.Store.ID() {
		t.Fatalf("report %+v", rep)
	}
	if got := strings.Join(rep.Gate.NotChecked, ","); got != "signature,expiry,scope" {
		t.Errorf("without trusted approvers, not checked %q", got)
	}
}

func TestVerifyCommandRefusesUnsignedAllowedWithoutTrustedApprovers(t *testing.T) {
	_, _, err := runCLI(context.Background(), "verify", "--insecure-allow-unsigned")
	if err == nil || !strings.Contains(err.Error(), "needs --trusted-approvers") {
		t.Fatalf("err %v", err)
	}
}
