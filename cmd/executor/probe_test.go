package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

var updateProbe = flag.Bool("update-probe", false, "rewrite testdata/probe-embedded.golden from a run of probe --embedded")

// runProbeCmd runs "executor probe" with args and returns its output and
// error.
func runProbeCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return runCLI(ctx, append([]string{"probe"}, args...)...)
}

func TestProbeJudgesTheFakeTaskService(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   embedded.StackOptions
		want   map[string]probe.Status
		safe   bool
		seen   map[string]string // row → text its Seen must hold
		reason []string          // texts the verdict must hold
	}{
		{
			name: "the fake task service answers every row safely and the verdict is safe",
			want: map[string]probe.Status{probe.RowRetry: probe.Safe, probe.RowConflict: probe.Safe, probe.RowConcurrent: probe.Safe,
				probe.RowLostReply: probe.Safe, probe.RowAfterDelete: probe.Safe, probe.RowScope: probe.Safe},
			safe: true,
			seen: map[string]string{
				probe.RowRetry:       "created fake-task-0001, then replayed fake-task-0001; 1 task for the intent",
				probe.RowAfterDelete: "created fake-task-0005 and deleted it; the retry: replayed fake-task-0005 (task deleted); 0 tasks for the intent",
				probe.RowConcurrent:  "16 calls at once: 1 created, 15 replayed, one task id fake-task-0003; 1 task for the intent",
				probe.RowLostReply:   "the retry: replayed fake-task-0004; 1 task for the intent",
			},
			reason: []string{"safe for at-least-once delivery"},
		},
		{
			name: "the fake task service in its broken create-on-every-call mode is unsafe, and the verdict names the rows",
			opts: embedded.StackOptions{UnsafeCreateEveryCall: true},
			want: map[string]probe.Status{probe.RowRetry: probe.Unsafe, probe.RowConflict: probe.Unsafe, probe.RowConcurrent: probe.Unsafe,
				probe.RowLostReply: probe.Unsafe, probe.RowAfterDelete: probe.Caveat, probe.RowScope: probe.Safe},
			seen: map[string]string{
				probe.RowRetry: "created fake-task-0001, then created fake-task-0002; 2 tasks for the intent",
				// It creates on every call, so a resend after a delete creates again.
				probe.RowAfterDelete: "deleted it; the retry: created",
				probe.RowConcurrent:  "16 calls at once: 16 created, 0 replayed, 16 task ids; 16 tasks for the intent",
			},
			reason: []string{"unsafe for at-least-once delivery",
				"a resend of the same approval creates a second task (second call, same key and body)",
				"concurrent deliveries of one approval create more than one task (N concurrent calls, one key)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.StartWith(t, tc.opts)
			out, errOut, err := runProbeCmd(t, "--server", env.URL(), "--yes", "--json")
			if tc.safe && err != nil || !tc.safe && (exitCode(err) != 1 || !errors.Is(err, errSilent)) {
				t.Fatalf("probe ended with %v (exit %d)\n%s%s", err, exitCode(err), out, errOut)
			}
			var rep probe.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("probe --json printed %q: %v", out, err)
			}
			got := map[string]probe.Status{}
			for _, r := range rep.Rows {
				got[r.ID] = r.Status
				if want, ok := tc.seen[r.ID]; ok && !strings.Contains(r.Seen, want) {
					t.Errorf("row %s saw %q, want it to hold %q", r.ID, r.Seen, want)
				}
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("row %s is %s, want %s", id, got[id], want)
				}
			}
			if rep.Verdict.Safe != tc.safe {
				t.Errorf("verdict safe = %v, want %v: %s", rep.Verdict.Safe, tc.safe, rep.Verdict.Summary)
			}
			for _, want := range tc.reason {
				if !strings.Contains(rep.Verdict.Summary, want) {
					t.Errorf("verdict %q lacks %q", rep.Verdict.Summary, want)
				}
			}
			// The service's own count of requests agrees with the report's.
			if c := env.Counts(); c.RequestsReceived != rep.Calls {
				t.Errorf("the service received %d requests, the report says %d calls", c.RequestsReceived, rep.Calls)
			}
		})
	}
}

func TestProbeWithoutYesSendsNothing(t *testing.T) {
	env := testenv.Start(t)
	before := env.Counts()
	out, errOut, err := runProbeCmd(t, "--server", env.URL())
	if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("probe without --yes ended with %v (exit %d), want exit 1 naming --yes", err, exitCode(err))
	}
	if out != "" {
		t.Errorf("probe without --yes printed a report:\n%s", out)
	}
	expectLines(t, "the plan", errOut, "create calls to the fake task service", "starting \"probe-", "creates 5 tasks", "It deletes 1 task of its own again", "Run again with --yes")
	if after := env.Counts(); after != before {
		t.Errorf("the service's counters went from %+v to %+v without --yes", before, after)
	}
}

func TestProbeAgainstAServiceWithoutFaultsDoesNotProveItSafe(t *testing.T) {
	// An ordinary service: no fault switch, so no reply can be lost.
	st, err := embedded.StartStack(embedded.StackOptions{Dir: t.TempDir(), Port: -1, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	out, errOut, err := runProbeCmd(t, "--server", st.URL(), "--yes")
	if exitCode(err) != 1 || !errors.Is(err, errSilent) {
		t.Fatalf("probe ended with %v (exit %d), want exit 1\n%s%s", err, exitCode(err), out, errOut)
	}
	expectLines(t, "the report", out,
		"a lost reply, then a retry: a lost reply could not be arranged: the fake task service has no fault switch",
		"verdict: not proven safe for at-least-once delivery",
		"  - not measured: a lost reply, then a retry",
	)
}

func TestProbeRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one call at once is not concurrency", []string{"--embedded", "--concurrency", "1"}, "--concurrency 1"},
		{"an unknown task service is named", []string{"--task-service", "jira"}, `--task-service "jira"`},
		{"embedded goes with no server", []string{"--embedded", "--server", "nats://127.0.0.1:1"}, "--embedded"},
		{"the timeout must be positive", []string{"--embedded", "--timeout", "0s"}, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runProbeCmd(t, tc.args...)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("probe %v ended with %v (exit %d), want a usage error naming %q", tc.args, err, exitCode(err), tc.want)
			}
		})
	}
}

func TestProbeHelpExplainsConsentAndTheRows(t *testing.T) {
	_, errOut, err := runProbeCmd(t, "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("probe --help: %v", err)
	}
	expectLines(t, "help", errOut, "--yes", "probe-<run id>-", "never touches", "--embedded", "lost reply", "-task-service", "Exit status")
}

// The table of a real run of probe --embedded, with the run id and the store
// id (random in each run) replaced.
func TestProbeEmbeddedPrintsTheGoldenTable(t *testing.T) {
	out, errOut, err := runProbeCmd(t, "--embedded", "--yes")
	if err != nil {
		t.Fatalf("probe --embedded --yes: %v\n%s%s", err, out, errOut)
	}
	got := regexp.MustCompile(`probe-[0-9a-f]{16}-`).ReplaceAllString(out, "probe-RUNID-")
	got = regexp.MustCompile(`store-[0-9a-f]+`).ReplaceAllString(got, "store-ID")
	path := filepath.Join("testdata", "probe-embedded.golden")
	if *updateProbe {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/executor -run TestProbeEmbeddedPrintsTheGoldenTable -update-probe writes it)", err)
	}
	if got != string(want) {
		t.Errorf("probe --embedded printed, unlike %s (-update-probe rewrites it):\n%s", path, got)
	}
}

// taggedPathOf is the path of the resource of (scope, intent) that the
// server's own log shows a PUT of: the name of the key without ".ics",
// the tag of the mark key that named it ("~." and 32 hexadecimal digits),
// and ".ics". The probe's mark key is in its own embedded server, so the
// tag is read from the log; one tagged path in all is expected.
func taggedPathOf(t *testing.T, s *davtest.Server, scope, intent string) string {
	t.Helper()
	name, err := caldav.ScopedResourceName(scope, intent)
	if err != nil {
		t.Fatal(err)
	}
	tagged := regexp.MustCompile("^" + regexp.QuoteMeta(s.ResourcePath(strings.TrimSuffix(name, caldav.ResourceSuffix))) + `~\.[0-9a-f]{32}\.ics$`)
	var paths []string
	for _, e := range s.LogEntries() {
		if e.Method == http.MethodPut && tagged.MatchString(e.Path) && !slices.Contains(paths, e.Path) {
			paths = append(paths, e.Path)
		}
	}
	if len(paths) != 1 {
		t.Fatalf("the %s log shows PUTs of %q for intent %s in scope %s, want one tagged name", s.Kind, paths, intent, scope)
	}
	return paths[0]
}

// puts counts the PUT requests the server's own log shows as received.
func puts(s *davtest.Server) int {
	n := 0
	for _, e := range s.LogEntries() {
		if e.Received && e.Method == http.MethodPut {
			n++
		}
	}
	return n
}

// probeReport decodes the JSON report of "executor probe --json".
func probeReport(t *testing.T, out string) probe.Report {
	t.Helper()
	var rep probe.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("probe --json printed %q: %v", out, err)
	}
	return rep
}

// checkCalDAVReport checks the rows and the verdict a CalDAV collection
// earns when composed with the intent ledger, as serve runs it: every row
// safe, the one after a deletion too (the resend is replayed, task
// deleted, and nothing is created again).
func checkCalDAVReport(t *testing.T, rep probe.Report, collectionURL string) {
	t.Helper()
	want := map[string]struct {
		status probe.Status
		answer string
		seen   string
	}{
		probe.RowRetry:       {probe.Safe, "first result", "then replayed"},
		probe.RowConflict:    {probe.Safe, "conflict, first kept", "the first body again: replayed"},
		probe.RowConcurrent:  {probe.Safe, "1 create", "1 created"},
		probe.RowLostReply:   {probe.Safe, "replayed", "the retry: replayed"},
		probe.RowAfterDelete: {probe.Safe, "yes", "deleted it; the retry: replayed " + probe.Scope + "~~probe-"},
		probe.RowScope:       {probe.Safe, "each caller scope, in the collection " + collectionURL, "every answer came from store caldav-"},
		// The rows of a service with no key do not arise: the server's
		// create-if-absent decides.
		probe.RowReadAfterWrite: {probe.NotApplicable, "not applicable", "create-if-absent decides"},
		probe.RowNaive:          {probe.NotApplicable, "not applicable", "If-None-Match: *"},
	}
	if rep.Class != service.ClassAtomic {
		t.Errorf("class %q, want %q", rep.Class, service.ClassAtomic)
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("the report has %d rows, want %d", len(rep.Rows), len(want))
	}
	for _, r := range rep.Rows {
		w, ok := want[r.ID]
		if !ok {
			t.Errorf("unexpected row %q", r.ID)
			continue
		}
		if r.Status != w.status || r.Answer != w.answer || !strings.Contains(r.Seen, w.seen) {
			t.Errorf("row %s: %s %q, seen %q; want %s %q, seen holding %q", r.ID, r.Status, r.Answer, r.Seen, w.status, w.answer, w.seen)
		}
		wantTasks := "; 1 task for the intent"
		if r.ID == probe.RowAfterDelete {
			wantTasks = " (task deleted); 0 tasks for the intent"
		}
		if r.IntentID != "" && !strings.HasSuffix(r.Seen, wantTasks) {
			t.Errorf("row %s: seen %q, want it to end %q, counted from the collection", r.ID, r.Seen, wantTasks)
		}
	}
	v := rep.Verdict
	if !v.Safe || v.Headline != "safe for at-least-once delivery" || len(v.Caveats) != 0 {
		t.Errorf("verdict %+v; want safe without a caveat", v)
	}
}

// The probe against each real server: every row measured, the server's own
// log and storage agreeing with what the report says.
func TestProbeCalDAVAgainstEachServer(t *testing.T) {
	for _, kind := range davtest.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			s := davtest.Start(t, kind, davtest.Options{})
			// The run's tasks are kept, to be counted in storage.
			out, errOut, err := runProbeCmd(t, "--task-service", "caldav", "--caldav-url", s.CollectionURL, "--yes", "--json", "--keep-tasks")
			if err != nil {
				t.Fatalf("probe ended with %v (exit %d)\n%s%s", err, exitCode(err), out, errOut)
			}
			rep := probeReport(t, out)
			checkCalDAVReport(t, rep, s.CollectionURL)
			if c := rep.Cleanup; !c.Kept || c.Left != 4 || c.Deleted != 0 {
				t.Errorf("cleanup %+v, want 4 tasks kept", c)
			}

			// The server's side: one .ics file per intent of the run but
			// the deleted one, which is not created again, and for the
			// concurrent row one 201 among all its PUTs.
			names := s.StoredNames()
			if len(names) != 4 {
				t.Errorf("the collection's folder holds %v, want 4 of the 5 intents of the run (one deleted)", names)
			}
			if !strings.Contains(errOut, "intent ledger: embedded in this process") {
				t.Errorf("the probe does not say which intent ledger it uses:\n%s", errOut)
			}
			for _, n := range names {
				if !strings.HasPrefix(n, probe.Scope+"~~"+rep.Prefix) {
					t.Errorf("the collection holds %s, which is not the run's (%s*)", n, rep.Prefix)
				}
			}
			// A call for a key the ledger knows is answered from the
			// ledger and a GET, without a PUT: the retry's second call,
			// the conflict row's two later calls and the resend after the
			// deletion. The lost reply's retry still PUTs (the ledger was
			// never written: the reply was lost), and so does every
			// concurrent call that read the ledger before the first create
			// was written to it.
			wantPUTs := map[string]int{probe.RowRetry: 1, probe.RowConflict: 1, probe.RowLostReply: 2, probe.RowAfterDelete: 1}
			sum := 0
			for _, r := range rep.Rows {
				if r.IntentID == "" { // key scope; the rows that do not apply
					continue
				}
				path := taggedPathOf(t, s, probe.Scope, r.IntentID)
				got, creates := s.PUTs(path), s.Creates(path)
				sum += got
				if creates != 1 {
					t.Errorf("row %s: the %s log shows %d creates (201) of %s; want 1", r.ID, kind, creates, path)
				}
				if r.ID == probe.RowConcurrent {
					if got < 1 || got > rep.Concurrency {
						t.Errorf("the %s log shows %d PUTs of %s; want 1 to %d", kind, got, path, rep.Concurrency)
					}
				} else if got != wantPUTs[r.ID] {
					t.Errorf("row %s: the %s log shows %d PUTs of %s; want %d", r.ID, kind, got, path, wantPUTs[r.ID])
				}
			}
			if got := puts(s); got != sum || int64(got) > rep.Calls {
				t.Errorf("the %s log shows %d PUTs in all, %d for the run's intents, the report %d create calls", kind, got, sum, rep.Calls)
			}
		})
	}
}

func TestProbeCalDAVWithoutYesCreatesNothing(t *testing.T) {
	s := davtest.Start(t, davtest.Xandikos, davtest.Options{})
	before := s.StoredNames()
	out, errOut, err := runProbeCmd(t, "--task-service", "caldav", "--caldav-url", s.CollectionURL)
	if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("probe without --yes ended with %v (exit %d), want exit 1 naming --yes", err, exitCode(err))
	}
	if out != "" {
		t.Errorf("probe without --yes printed a report:\n%s", out)
	}
	expectLines(t, "the plan", errOut, "CalDAV collection "+s.CollectionURL, "creates 5 tasks", "deletes 1 task of its own", "Nothing was sent")
	after := s.StoredNames()
	if len(before) != 0 || len(after) != 0 {
		t.Errorf("the collection's folder held %v before and %v after, want nothing both times", before, after)
	}
	if n := puts(s); n != 0 {
		t.Errorf("the server's log shows %d PUTs without --yes", n)
	}
}

// The probe with a login (Radicale's htpasswd): the password from a file
// and from $CALDAV_PASSWORD works, a wrong one is a clear permanent error,
// and the password is printed nowhere.
func TestProbeCalDAVWithALogin(t *testing.T) {
	const user, password = "alice", "pw-7d1f0c-not-for-print"
	secrets := []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	noSecret := func(t *testing.T, what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the password:\n%s", what, text)
			}
		}
	}
	s := davtest.Start(t, davtest.Radicale, davtest.Options{User: user, Password: password})
	dir := t.TempDir()
	writeFile := func(name, content string) string { return writeFileIn(t, dir, name, content) }
	base := []string{"--task-service", "caldav", "--caldav-url", s.CollectionURL, "--caldav-user", user, "--concurrency", "4", "--yes"}

	t.Run("the password from --caldav-password-file", func(t *testing.T) {
		t.Setenv(service.CalDAVPasswordEnv, "")
		file := writeFile("password", password+"\n")
		out, errOut, err := runProbeCmd(t, append(base, "--caldav-password-file", file, "--json")...)
		if err != nil {
			t.Fatalf("probe ended with %v (exit %d)\n%s%s", err, exitCode(err), out, errOut)
		}
		checkCalDAVReport(t, probeReport(t, out), s.CollectionURL)
		noSecret(t, "the JSON report", out)
		noSecret(t, "stderr", errOut)
	})
	t.Run("the password from $CALDAV_PASSWORD", func(t *testing.T) {
		t.Setenv(service.CalDAVPasswordEnv, password)
		out, errOut, err := runProbeCmd(t, base...)
		if err != nil {
			t.Fatalf("probe ended with %v (exit %d)\n%s%s", err, exitCode(err), out, errOut)
		}
		if !strings.Contains(out, "verdict: safe for at-least-once delivery") {
			t.Errorf("the report lacks the safe verdict:\n%s", out)
		}
		noSecret(t, "the report", out)
		noSecret(t, "stderr", errOut)
	})
	for _, tc := range []struct {
		name string
		file bool
	}{{"a wrong password from the file", true}, {"a wrong password from $CALDAV_PASSWORD", false}} {
		t.Run(tc.name+" is a permanent error naming 401, and exit 1", func(t *testing.T) {
			wrong := password + "-wrong"
			args := append([]string{}, base...)
			if tc.file {
				t.Setenv(service.CalDAVPasswordEnv, "")
				args = append(args, "--caldav-password-file", writeFile("wrong", wrong))
			} else {
				t.Setenv(service.CalDAVPasswordEnv, wrong)
			}
			before := s.StoredNames()
			out, errOut, err := runProbeCmd(t, args...)
			if exitCode(err) != 1 {
				t.Fatalf("probe with a wrong password ended with %v (exit %d), want exit 1\n%s%s", err, exitCode(err), out, errOut)
			}
			// One clear error before the first create, not a table of
			// failed rows: the service is not unsafe, the login is wrong.
			if out != "" {
				t.Errorf("probe with a wrong password printed a report:\n%s", out)
			}
			for _, want := range []string{"probe: not run, nothing was created", "401 Unauthorized", "a permanent error", "--caldav-user"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q lacks %q", err, want)
				}
			}
			all := out + errOut + err.Error()
			for _, s := range append(secrets, wrong) {
				if strings.Contains(all, s) {
					t.Errorf("the output shows a password:\n%s", all)
				}
			}
			if after := s.StoredNames(); len(after) != len(before) {
				t.Errorf("the collection went from %d to %d resources with a wrong password", len(before), len(after))
			}
		})
	}
	t.Run("--help shows no password", func(t *testing.T) {
		t.Setenv(service.CalDAVPasswordEnv, password)
		_, errOut, err := runProbeCmd(t, "--help")
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("probe --help: %v", err)
		}
		expectLines(t, "help", errOut, "-caldav-url", "-caldav-user", "-caldav-password-file", "$"+service.CalDAVPasswordEnv)
		noSecret(t, "--help", errOut)
	})
}

// With --server, the probe uses the deployment's intent ledger, and says
// so; without the bucket it stops before it creates anything.
func TestProbeCalDAVUsesTheDeploymentsLedgerWithServer(t *testing.T) {
	s := davtest.Start(t, davtest.Radicale, davtest.Options{})
	env := testenv.Start(t)
	_, errOut, err := runProbeCmd(t, "--server", env.URL(), "--task-service", "caldav", "--caldav-url", s.CollectionURL, "--yes", "--json")
	if !errors.Is(err, ledger.ErrNoBucket) || !strings.Contains(err.Error(), "provision") || puts(s) != 0 {
		t.Errorf("probe without the ledger bucket: %v, %d PUTs; want a refusal naming provision and nothing sent\n%s", err, puts(s), errOut)
	}
	if err := run(context.Background(), []string{"provision", "--server", env.URL()}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runProbeCmd(t, "--server", env.URL(), "--task-service", "caldav", "--caldav-url", s.CollectionURL, "--yes", "--json")
	if err != nil {
		t.Fatalf("probe ended with %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "intent ledger: "+ledger.Bucket+" over NATS at") {
		t.Errorf("the probe does not say it uses the deployment's ledger:\n%s", errOut)
	}
	rep := probeReport(t, out)
	for _, r := range rep.Rows {
		if r.ID == probe.RowAfterDelete && (r.Status != probe.Safe || r.Answer != "yes") {
			t.Errorf("row after_delete: %s %q (%s); want safe yes", r.Status, r.Answer, r.Seen)
		}
	}
}

// secretToken stands for a password or token in a CalDAV URL or login; no
// output of a command may show it.
const secretToken = "SECRET-4c19"

func showsSecret(texts ...string) bool {
	for _, s := range texts {
		if strings.Contains(s, secretToken) {
			return true
		}
	}
	return false
}

// A --caldav-url that carries a token in its query, or a password in its
// user information, is refused by every command that takes it, without
// echoing either in the error or on stderr.
func TestACalDAVURLWithASecretIsRefusedWithoutShowingIt(t *testing.T) {
	bad := "http://alice:" + secretToken + "@127.0.0.1:1/alice/tasks/?token=" + secretToken
	query := "http://127.0.0.1:1/alice/tasks/?token=" + secretToken
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve with a password and a token", []string{"serve", "--insecure-allow-unsigned", "--server", "nats://127.0.0.1:1", "--task-service", "caldav", "--caldav-url", bad}},
		{"serve with a token in the query", []string{"serve", "--insecure-allow-unsigned", "--server", "nats://127.0.0.1:1", "--task-service", "caldav", "--caldav-url", query}},
		{"serve --check-config", []string{"serve", "--check-config", "--insecure-allow-unsigned", "--task-service", "caldav", "--caldav-url", query}},
		{"probe", []string{"probe", "--task-service", "caldav", "--caldav-url", bad, "--yes"}},
		{"demo", []string{"demo", "--task-service", "caldav", "--caldav-url", query}},
	} {
		t.Run(c.name+" is refused without showing the secret", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if err == nil {
				t.Fatalf("%v passed", c.args)
			}
			if exitCode(err) != 2 {
				t.Errorf("%v: %v (exit %d), want a usage error (exit 2)", c.args, err, exitCode(err))
			}
			if showsSecret(err.Error(), out.String(), errOut.String()) {
				t.Errorf("%v shows the secret:\n%v\n%s%s", c.args, err, out.String(), errOut.String())
			}
			if strings.Contains(err.Error(), "127.0.0.1:1") && !strings.Contains(err.Error(), "REDACTED") {
				t.Errorf("the error %q shows the URL without saying where the secret was", err)
			}
		})
	}
}

// probe against a CalDAV server that refuses the login, or redirects to a
// URL with a token, reports it without the password or the token.
func TestProbeOfACalDAVServerThatRefusesShowsNoSecret(t *testing.T) {
	serve := func(status int, location string) string { return davtest.Answering(t, status, location) }
	for _, c := range []struct {
		name, url, says string
	}{
		{"a refused login", serve(http.StatusUnauthorized, ""), "401"},
		{"a missing collection", serve(http.StatusNotFound, ""), "404"},
		{"a redirect to a login page with a token", serve(http.StatusFound, "https://login.example/sso?token="+secretToken), "302"},
	} {
		t.Run(c.name+" is reported without the secret", func(t *testing.T) {
			t.Setenv(service.CalDAVPasswordEnv, secretToken)
			out, errOut, err := runProbeCmd(t, "--task-service", "caldav", "--caldav-url", c.url, "--caldav-user", "alice", "--yes")
			if exitCode(err) != 1 {
				t.Fatalf("probe ended with %v (exit %d), want exit 1\n%s%s", err, exitCode(err), out, errOut)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("the error %q does not say %s", err, c.says)
			}
			if showsSecret(err.Error(), out, errOut) {
				t.Errorf("probe shows the secret:\n%v\n%s%s", err, out, errOut)
			}
		})
	}
}

// ownTodo is a task of the collection's owner, made in a calendar app.
func ownTodo(uid, title string) []byte {
	return []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//a calendar app//EN\r\nBEGIN:VTODO\r\nUID:" + uid +
		"\r\nDTSTAMP:20261201T000000Z\r\nSUMMARY:" + title + "\r\nSTATUS:NEEDS-ACTION\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
}

// The probe and the demo, run as docs/CALDAV.md runs them against a user's
// collection, leave it as they found it: the collection's resources, in
// the server's storage and in a REPORT, are the same before and after.
// With --keep-tasks their tasks stay, in their own scopes and titled as
// theirs.
func TestTheProbeAndTheDemoLeaveTheCollectionAsTheyFoundIt(t *testing.T) {
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	if code := srv.Put(srv.ResourcePath("groceries.ics"), ownTodo("groceries", "buy milk")); code != http.StatusCreated {
		t.Fatalf("PUT the owner's task: %d", code)
	}
	dav, err := caldav.New(caldav.Config{CollectionURL: srv.CollectionURL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := dav.Tasks(ctx)
		if err != nil {
			t.Fatalf("listing the collection: %v", err)
		}
		return l.VTODOs
	}
	before, listedBefore := srv.StoredNames(), listed()
	probeArgs := []string{"--task-service", "caldav", "--caldav-url", srv.CollectionURL, "--concurrency", "4", "--yes"}
	demoArgs := []string{"--task-service", "caldav", "--caldav-url", srv.CollectionURL}

	t.Run("the probe deletes its tasks at the end and says so", func(t *testing.T) {
		out, errOut, err := runProbeCmd(t, probeArgs...)
		if err != nil {
			t.Fatalf("probe: %v\n%s%s", err, out, errOut)
		}
		t.Logf("executor probe --task-service caldav:\n%s%s", errOut, out)
		if !strings.Contains(out, "cleanup: deleted 4 tasks of this run; 0 tasks left") {
			t.Errorf("the probe does not say what it deleted:\n%s", out)
		}
		if !strings.Contains(errOut, "it deletes them at the end (--keep-tasks keeps them)") {
			t.Errorf("the plan does not say the tasks are deleted:\n%s", errOut)
		}
	})
	t.Run("the demo deletes its tasks at the end and says so", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errOut bytes.Buffer
		if err := runDemoCmd(ctx, &out, &errOut, demoArgs...); err != nil {
			t.Fatalf("demo: %v\n%s%s", err, out.String(), errOut.String())
		}
		t.Logf("executor demo --task-service caldav:\n%s", out.String())
		expectLines(t, "the demo", out.String(),
			"cleanup: deleted the run's 2 tasks; the service lists 1 task, as before the run",
			"A 0, B 0, C 0 (of all 1)")
		if strings.Contains(out.String(), "DIFFERS") {
			t.Errorf("a row differs:\n%s", out.String())
		}
	})
	t.Run("the collection holds what it held before", func(t *testing.T) {
		after, listedAfter := srv.StoredNames(), listed()
		t.Logf("resources before %v (%d listed), after %v (%d listed)", before, listedBefore, after, listedAfter)
		if !slices.Equal(before, after) || listedBefore != listedAfter {
			t.Errorf("resources before %v (%d listed), after %v (%d listed)", before, listedBefore, after, listedAfter)
		}
	})
	t.Run("with --keep-tasks the tasks stay, in their scopes and titled as theirs", func(t *testing.T) {
		if out, errOut, err := runProbeCmd(t, append(probeArgs, "--keep-tasks")...); err != nil || !strings.Contains(out, "cleanup: kept 4 tasks of this run (--keep-tasks)") {
			t.Errorf("probe --keep-tasks: %v\n%s%s", err, out, errOut)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errOut bytes.Buffer
		if err := runDemoCmd(ctx, &out, &errOut, append(demoArgs, "--keep-tasks")...); err != nil || !strings.Contains(out.String(), "cleanup: kept the run's 2 tasks (--keep-tasks)") {
			t.Errorf("demo --keep-tasks: %v\n%s%s", err, out.String(), errOut.String())
		}
		counts := map[string]int{}
		for _, name := range srv.StoredNames() {
			if slices.Contains(before, name) {
				continue
			}
			body := string(srv.Stored(name))
			switch {
			case strings.HasPrefix(name, probe.Scope+"~~") && strings.Contains(body, "SUMMARY:"+probe.TitlePrefix):
				counts["probe"]++
			case strings.HasPrefix(name, audit.DemoScope+"~~") && strings.Contains(body, "SUMMARY:"+audit.DemoTitlePrefix):
				counts["demo"]++
			default:
				t.Errorf("%s is neither the probe's nor the demo's:\n%s", name, body)
			}
		}
		if counts["probe"] != 4 || counts["demo"] != 2 {
			t.Errorf("kept %v, want 4 of the probe and 2 of the demo", counts)
		}
	})
}
