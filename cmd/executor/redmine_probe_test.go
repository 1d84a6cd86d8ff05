package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/redminetest"
)

// redmineProbeArgs are probe's flags for srv, with the API key from a file.
func redmineProbeArgs(t *testing.T, srv *redminetest.Server, extra ...string) []string {
	t.Helper()
	key := writeTestFile(t, "redmine-api-key", srv.APIKey+"\n")
	return append([]string{"--task-service", "redmine", "--redmine-url", srv.URL, "--redmine-project", srv.Project,
		"--redmine-field", srv.FieldName, "--redmine-api-key-file", key}, extra...)
}

// executor probe against a real Redmine: the adapter's rows are safe, the
// class is stated, a lookup right after a create sees it, and two plain
// creates with one key make two issues, as Redmine's own log and listing
// count them.
func TestProbeOfARealRedmine(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	redminetest.Require(t)
	srv := redminetest.Start(t, redminetest.Options{})
	// The lost-reply row waits for the lost call's lock to run out: a TTL
	// just over the probe's 10 s call timeout keeps the wait short.
	out, errOut, err := runProbeCmd(t, redmineProbeArgs(t, srv, "--redmine-lock-ttl", "11s", "--yes", "--json")...)
	if err != nil {
		t.Fatalf("probe --task-service redmine: %v\n%s%s", err, out, errOut)
	}
	if strings.Contains(out+errOut, srv.APIKey) {
		t.Errorf("probe shows the API key:\n%s%s", out, errOut)
	}
	var rep probe.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("probe --json printed %q: %v", out, err)
	}
	var text bytes.Buffer
	if err := probe.WriteText(&text, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("executor probe --task-service redmine:\n%s", text.String())
	rows := map[string]probe.Row{}
	for _, r := range rep.Rows {
		rows[r.ID] = r
	}
	for _, c := range []struct {
		row    string
		status probe.Status
		answer string
		seen   string
	}{
		{probe.RowRetry, probe.Safe, "first result", "1 task for the intent"},
		{probe.RowConflict, probe.Safe, "conflict, first kept", "1 task for the intent"},
		{probe.RowConcurrent, probe.Safe, "1 create", "16 calls at once: 1 created, 15 replayed"},
		{probe.RowLostReply, probe.Safe, "replayed", "1 task for the intent"},
		{probe.RowAfterDelete, probe.Safe, "yes", "(task deleted); 0 tasks for the intent"},
		{probe.RowScope, probe.Safe, "", "every answer came from store redmine-"},
		{probe.RowReadAfterWrite, probe.Safe, "seen at once", "the lookup right after it found"},
		{probe.RowNaive, probe.Info, "2 tasks", "2 tasks for the intent; deleted again, 0 tasks left"},
	} {
		t.Run("the row "+c.row+" answers "+string(c.status), func(t *testing.T) {
			r, ok := rows[c.row]
			if !ok {
				t.Fatalf("no row %s in %+v", c.row, rep.Rows)
			}
			if r.Status != c.status || c.answer != "" && r.Answer != c.answer || !strings.Contains(r.Seen, c.seen) {
				t.Errorf("row %s: %s %q, saw %q; want %s %q, seeing %q", c.row, r.Status, r.Answer, r.Seen, c.status, c.answer, c.seen)
			}
		})
	}
	if rep.Class != service.ClassNoKey || !rep.Verdict.Safe {
		t.Errorf("class %q, verdict %q; want %q and safe", rep.Class, rep.Verdict.Summary, service.ClassNoKey)
	}
	// Redmine's own log: one POST answered 201 per issue created. The
	// adapter's six creating rows made one issue each (the one after a
	// deletion was deleted), and the naive row two.
	received, created := srv.Posts()
	if created != 8 || received != created {
		t.Errorf("Redmine's log shows %d POSTs of issues, %d answered 201; want 8 and 8", received, created)
	}
	// The cleanup deleted the issue of each of the adapter's five rows
	// whose issue was left, and Redmine lists none of the run's.
	if c := rep.Cleanup; c.Kept || c.Deleted != 5 || c.Left != 0 || len(c.Failed) != 0 {
		t.Errorf("cleanup %+v, want 5 issues deleted and none left", c)
	}
	perIntent := map[string]int{}
	for _, is := range srv.Issues(t) {
		perIntent[redmineIssueIntent(is.Mark)]++
	}
	for _, r := range rep.Rows {
		if n := perIntent[r.IntentID]; r.IntentID != "" && n != 0 {
			t.Errorf("Redmine lists %d issues for the intent of row %s after the probe, want 0 (deleted)", n, r.ID)
		}
	}
}

// redmineIssueIntent is the intent id a mark names ("st1 <scope> <intent>
// <digest>"; the probe's intent ids need no escaping), or "".
func redmineIssueIntent(mark string) string {
	f := strings.Fields(mark)
	if len(f) != 4 {
		return ""
	}
	return f[2]
}
