package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
)

func TestRequestRefusesABadValueNamingItsFlagAndWritesNothing(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 120) // 240 bytes: an intent id, but too long a CalDAV resource name
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no intent id", []string{"--title", "Check the items"}, "--intent ID is required"},
		{"no title", []string{"--intent", "intent-0001"}, "--title TEXT is required"},
		{"a blank title", []string{"--intent", "intent-0001", "--title", "   "}, "--title: the gate refuses task.title: must not be empty"},
		{"a title of two lines", []string{"--intent", "intent-0001", "--title", "one\ntwo"}, "--title: the gate refuses task.title: must be one line"},
		{"a title too long", []string{"--intent", "intent-0001", "--title", strings.Repeat("x", 1025)}, "--title: the gate refuses task.title: is 1025 bytes long; at most 1024"},
		{"a title that is not UTF-8", []string{"--intent", "intent-0001", "--title", "a\xff"}, "--title is not valid UTF-8"},
		{"an intent id with a space", []string{"--intent", "intent 0001", "--title", "x"}, "--intent: the gate refuses intent_id: must not contain spaces"},
		{"an intent id not in NFC", []string{"--intent", "cafe\u0301", "--title", "x"}, "--intent: the gate refuses intent_id: must be in Unicode normalization form C"},
		{"an intent id too long for a CalDAV resource name", []string{"--intent", long, "--title", "x", "--provider", "caldav"},
			"--intent: the gate refuses intent_id: makes a 758-byte task name"},
		{"an intent id too long for a CalDAV resource name, for Redmine too", []string{"--intent", long, "--title", "x", "--provider", "redmine"},
			"--intent: the gate refuses intent_id: makes a 758-byte task name"},
		{"a due date in year 0", []string{"--intent", "i", "--title", "x", "--due", "0000-01-01"}, `--due: the gate refuses task.due_at: "0000-01-01" is before 1970-01-01`},
		{"a due day not in the calendar", []string{"--intent", "i", "--title", "x", "--due", "2026-02-30"}, `--due: the gate refuses task.due_at: "2026-02-30" is not a day of the calendar`},
		{"a due date in another format", []string{"--intent", "i", "--title", "x", "--due", "24/12/2026"}, "--due: the gate refuses task.due_at: must be an RFC 3339 date-time"},
		{"an assignee with a space", []string{"--intent", "i", "--title", "x", "--assignee", "Ada L"}, "--assignee: the gate refuses task.assignee_person_ref"},
		{"an upper-case scope", []string{"--intent", "i", "--title", "x", "--scope", "Team-A"}, "--scope: the gate refuses scope: must be 1 to 64 lower-case"},
		{"a destination starting with a digit", []string{"--intent", "i", "--title", "x", "--destination", "9team"}, "--destination: the gate refuses destination"},
		{"an unknown provider", []string{"--intent", "i", "--title", "x", "--provider", "jira"}, `--provider "jira": want fake, caldav or redmine`},
		{"a stray argument", []string{"--intent", "i", "--title", "x", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "out")
			r := publisher(t, nil, append([]string{"request", "--out", dir}, c.args...)...)
			r.expect(t, exitUsage)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s was made (%v): a refused request writes nothing", dir, err)
			}
		})
	}
}

func TestRequestKeepsExistingFilesUnlessForced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"request", "--intent", "intent-0001", "--title", "Check the items", "--out", dir}
	publisher(t, nil, args...).expect(t, exitOK)
	first := readFile(t, filepath.Join(dir, "request.json"))
	writeFile(t, dir, "candidate.json", []byte("kept"))

	r := publisher(t, nil, append(args, "--title", "Another title")...)
	r.expect(t, exitFailure)
	if !strings.Contains(r.stderr, "candidate.json exists: keep it, or give --force to replace it; nothing written") {
		t.Errorf("stderr lacks the refusal:\n%s", r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, "request.json")); !bytes.Equal(got, first) {
		t.Errorf("request.json changed though candidate.json was kept:\n%s", got)
	}
	publisher(t, nil, append(args, "--force")...).expect(t, exitOK)
	if got := readFile(t, filepath.Join(dir, "request.json")); !bytes.Equal(got, first) {
		t.Errorf("the same flags wrote other bytes:\n%s\nthen\n%s", first, got)
	}
	if string(readFile(t, filepath.Join(dir, "candidate.json"))) == "kept" {
		t.Error("--force kept candidate.json")
	}
}

// A request written by the command, approved with a key that keygen made
// and added to the trusted approvers, passes every check of the gate, for
// each provider, and names what the flags gave.
func TestARequestWrittenApprovedWithAKeyPassesTheLocalGate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		flags     []string
		keyScopes []string
		want      document.Request
	}{
		{"for the fake service", nil, nil,
			document.Request{Provider: document.ProviderFake}},
		{"for CalDAV, due on a day, for a person", []string{"--provider", "caldav", "--due", "2026-12-24", "--assignee", "ada"}, nil,
			document.Request{Provider: document.ProviderCalDAV, Task: document.Task{DueAt: orNil("2026-12-24"), AssigneePersonRef: orNil("ada")}}},
		{"for a Redmine destination in a scope", []string{"--provider", "redmine-issue.v1", "--destination", "ops", "--scope", "team-a", "--due", "2026-12-24T09:00:00Z"},
			[]string{"--scope", "team-a"},
			document.Request{Provider: document.ProviderRedmine, Destination: "ops", Scope: "team-a", Task: document.Task{DueAt: orNil("2026-12-24T09:00:00Z")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			trusted := filepath.Join(dir, "trusted.json")
			publisher(t, nil, append([]string{"keygen", "--name", "ada", "--dir", dir, "--trusted", trusted}, c.keyScopes...)...).expect(t, exitOK)
			r := publisher(t, nil, append([]string{"request", "--intent", "intent-0001", "--title", "Check <the> items & more", "--out", dir}, c.flags...)...)
			r.expect(t, exitOK)
			if !strings.Contains(r.stdout, "next: publisher approve --candidate "+filepath.Join(dir, "candidate.json")) {
				t.Errorf("request does not say what comes next:\n%s", r.stdout)
			}
			f := files{filepath.Join(dir, "candidate.json"), filepath.Join(dir, "request.json"), filepath.Join(dir, "approval.json")}
			approve := []string{"approve", "--candidate", f.candidate, "--request", f.request, "--key", filepath.Join(dir, "ada.key"), "-o", f.approval}
			publisher(t, nil, approve...).expect(t, exitOK)
			check := publisher(t, nil, f.args("check", "--trusted-approvers", trusted)...)
			check.expect(t, exitOK)
			if !strings.HasPrefix(check.stdout, "pass (signed by trusted approver ada)") {
				t.Errorf("check: %s", check.stdout)
			}
			var got document.Request
			if err := json.Unmarshal(readFile(t, f.request), &got); err != nil {
				t.Fatalf("request.json: %v", err)
			}
			want := c.want
			want.Task.Title = "Check <the> items & more"
			if got.IntentID != "intent-0001" || got.RequestID != "request-intent-0001" || got.Provider != want.Provider ||
				got.Destination != want.Destination || got.Scope != want.Scope || got.Task.Title != want.Task.Title ||
				deref(got.Task.DueAt) != deref(want.Task.DueAt) || deref(got.Task.AssigneePersonRef) != deref(want.Task.AssigneePersonRef) {
				t.Errorf("request %+v, want %+v", got, want)
			}
		})
	}
}

func TestRequestHelpNamesEveryFlagAndPublisherHelpListsIt(t *testing.T) {
	t.Parallel()
	r := publisher(t, nil, "request", "--help")
	r.expect(t, exitOK)
	help := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
	for _, w := range []string{"request --intent ID --title TEXT", "-provider SERVICE", "-destination NAME", "-scope SCOPE",
		"-due DATE", "-assignee REF", "-out DIR", "-force", "refuses the seed request", "Exit status: 0 written"} {
		if !strings.Contains(help, w) {
			t.Errorf("request --help lacks %q:\n%s", w, help)
		}
	}
	usage := publisher(t, nil, "--help")
	if !strings.Contains(usage.stdout, "publisher request --intent ID --title TEXT") {
		t.Errorf("publisher --help does not list request:\n%s", usage.stdout)
	}
}

func orNil(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "(null)"
	}
	return *s
}
