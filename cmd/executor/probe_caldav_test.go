package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

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
				name, err := caldav.ScopedResourceName(probe.Scope, r.IntentID)
				if err != nil {
					t.Fatal(err)
				}
				path := s.ResourcePath(name)
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
