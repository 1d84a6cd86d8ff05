package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// redmineFlagsOf are the flags that point a command at srv; the API key
// comes from $REDMINE_API_KEY, which the caller sets.
func redmineFlagsOf(srv *redminetest.Server, field string) []string {
	return []string{"--task-service", "redmine", "--redmine-url", srv.URL, "--redmine-project", srv.Project, "--redmine-field", field}
}

// runRedmineVerify runs executor verify against env's pipeline and srv, and
// returns its report and error.
func runRedmineVerify(t *testing.T, env *testenv.Env, srv *redminetest.Server) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	// With serve's lock TTL, shorter than verify's --timeout: verify takes no lock.
	args := append([]string{"verify", "--server", env.URL(), "--redmine-lock-ttl", "20s"}, redmineFlagsOf(srv, srv.FieldName)...)
	err := run(ctx, args, &out, &errOut)
	if strings.Contains(out.String()+errOut.String(), srv.APIKey) || err != nil && strings.Contains(err.Error(), srv.APIKey) {
		t.Errorf("verify shows the API key")
	}
	return out.String() + errOut.String(), err
}

// executor verify --task-service redmine audits the project's marked issues:
// after a clean run every check holds; a second issue carrying a key that
// has one is reported naming both issues; an issue carrying a key no
// receipt names is reported.
func TestVerifyOfARealRedmine(t *testing.T) {
	redminetest.Require(t)
	s := testenv.SeedFor(t, scenario.Redmine)
	srv := redminetest.Start(t, redminetest.Options{})
	env := testenv.Start(t)
	t.Setenv(service.RedmineAPIKeyEnv, srv.APIKey) // the executor process inherits it
	startExecutor(t, env.URL(), "exec-1", redmineFlagsOf(srv, srv.FieldName)...)

	var first *testenv.Receipt
	for i, e := range [][]byte{s.Original.Envelope(), s.Original.Envelope(), s.Changed.Envelope(), s.NewIntent.Envelope()} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sent, err := testenv.Publish(ctx, env.JS, e)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq)
		if i == 0 {
			first = rc
		}
	}
	if first.Outcome != document.OutcomeCreated || first.TaskID == nil {
		t.Fatalf("the first receipt: %+v, want created with an issue", first)
	}
	firstID := *first.TaskID

	report, err := runRedmineVerify(t, env, srv)
	t.Logf("executor verify --task-service redmine after a clean run:\n%s", report)
	if err != nil {
		t.Fatalf("verify failed after a clean run: %v", err)
	}
	expectLines(t, "the report", report,
		"Redmine project "+srv.Project+" at "+srv.URL+"/", "not applicable: Redmine keeps no call log",
		"n/a  4.", "ok   2.", "ok   3.", "ok   11.", "verify: all checks hold")

	// A second issue with the first one's key (its mark copied), made by
	// hand: the trace a lock holder stalled past its TTL would leave.
	var mark string
	for _, is := range srv.Issues(t) {
		if fmt.Sprint(is.ID) == firstID {
			mark = is.Mark
		}
	}
	if !strings.HasPrefix(mark, redmine.MarkPrefix("", "intent-0001")) {
		t.Fatalf("issue #%s carries the mark %q, not the key of %s", firstID, mark, "intent-0001")
	}
	second := srv.CreateIssue(t, "a second issue for the same key", mark)
	report, err = runRedmineVerify(t, env, srv)
	t.Logf("verify with a second issue for %s:\n%s", "intent-0001", violationLines(report))
	wantDup := fmt.Sprintf(`intent %q in scope "default" has 2 tasks in Redmine project %s at %s: task %s at issue #%s, task %d at issue #%d`,
		"intent-0001", srv.Project, srv.URL+"/", firstID, firstID, second, second)
	if !errors.Is(err, errSilent) || !strings.Contains(report, "FAIL 2.") || !strings.Contains(report, wantDup) {
		t.Errorf("verify with a second issue for one key: %v; want FAIL 2. and %q\n%s", err, wantDup, report)
	}
	srv.DeleteIssue(t, second)

	// An issue carrying a key that no receipt names.
	stray := srv.CreateIssue(t, "made outside the pipeline",
		redmine.Mark("", "intent-by-hand", "sha256:"+strings.Repeat("0", 64)))
	report, err = runRedmineVerify(t, env, srv)
	t.Logf("verify with an issue no receipt names:\n%s", violationLines(report))
	wantStray := fmt.Sprintf(`intent "intent-by-hand" in scope "default": task %d at issue #%d exists, but no created or replayed receipt names it`, stray, stray)
	if !errors.Is(err, errSilent) || !strings.Contains(report, "FAIL 3.") || !strings.Contains(report, wantStray) {
		t.Errorf("verify with an issue no receipt names: %v; want FAIL 3. and %q\n%s", err, wantStray, report)
	}
}
