package caldav_test

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// TestWhatAPersonSeesInTheirClients creates tasks through the adapter,
// syncs the collection with vdirsyncer and reads it with todoman, as a
// person with those clients does; then completes the task in todoman,
// syncs it back, and sends the same request again.
func TestWhatAPersonSeesInTheirClients(t *testing.T) {
	const title = "Send the signed contract to Acme"
	summary := "Alice sends Acme the signed contract before the holidays."
	evidence := []string{"I'll send Acme the contract by the 24th.", "Make it 09:30 their time, they're in Singapore."}
	wantDescription := summary + "\n\nEvidence:\n- “" + evidence[0] + "”\n- “" + evidence[1] + "”\n\n" +
		"Transcript: weekly-2026-11-30\nSource version: v1"
	for _, tc := range []struct {
		name string
		due  *string
		// tz is the zone the person's clients show times in.
		tz string
		// line is what todoman's list shows for the task, after its id.
		line string
		// due is the porcelain list's due time (nil: none).
		wantDue *int64
		stored  string
	}{
		{"a task due at 09:30 +08:00 shows that time to a person in that zone", ptr("2026-12-24T09:30:00+08:00"), "Asia/Shanghai",
			"2026-12-24 09:30 " + title, ptr(time.Date(2026, 12, 24, 1, 30, 0, 0, time.UTC).Unix()), "DUE;TZID=\"UTC+08:00\":20261224T093000\r\n"},
		{"the same task shows the same moment to a person in UTC", ptr("2026-12-24T09:30:00+08:00"), "UTC",
			"2026-12-24 01:30 " + title, ptr(time.Date(2026, 12, 24, 1, 30, 0, 0, time.UTC).Unix()), "DUE;TZID=\"UTC+08:00\":20261224T093000\r\n"},
		{"a task due on a date shows that date, without a time, even west of UTC", ptr("2026-12-24"), "America/New_York",
			"2026-12-24 " + title, ptr(time.Date(2026, 12, 24, 0, 0, 0, 0, mustZone(t, "America/New_York")).Unix()), "DUE;VALUE=DATE:20261224\r\n"},
		{"a task without a due date shows none", nil, "Asia/Shanghai",
			"(no due date) " + title, nil, ""},
	} {
		for _, k := range davtest.Kinds() {
			t.Run(tc.name+", on "+string(k), func(t *testing.T) {
				t.Parallel()
				davtest.Require(t, k)
				davtest.RequireClients(t)
				opts, cfg := davtest.Options{}, caldav.Config{}
				if k == davtest.Radicale {
					// With a login, as a real server has one.
					opts = davtest.Options{User: "alice", Password: "correct horse battery"}
					cfg = caldav.Config{Username: opts.User, Password: opts.Password}
				}
				s := davtest.Start(t, k, opts)
				a := adapter(t, s.CollectionURL, cfg)
				req := request("intent-client-0001", title)
				req.Task.DueAt = tc.due
				req.Summary, req.Evidence, req.TranscriptID = summary, evidence, "weekly-2026-11-30"
				if res := create(t, a, req); res.Outcome != taskservice.Created {
					t.Fatalf("the first create answered %s, want created", res.Outcome)
				}
				name, path := resourcePath(t, s, req.IntentID)
				if tc.stored != "" && !strings.Contains(string(s.Stored(name)), tc.stored) {
					t.Errorf("the stored task lacks %q:\n%s", tc.stored, s.Stored(name))
				}

				// The adapter's own listing (what verify reads) finds it too.
				if l := listing(t, a); len(l.Tasks) != 1 || l.Tasks[0].IntentID != req.IntentID || l.VTODOs != 1 {
					t.Errorf("the adapter lists %+v, want the one task", l)
				}

				c := davtest.NewClients(t, s, tc.tz)
				c.Sync()
				todos := c.List()
				if len(todos) != 1 {
					t.Fatalf("todoman lists %d tasks, want 1: %+v", len(todos), todos)
				}
				got := todos[0]
				if got.Summary != title || got.Description != wantDescription || got.Completed || got.List != "tasks" {
					t.Errorf("todoman shows %+v\nwant the title %q, the description\n%q\nand an open task in the list tasks", got, title, wantDescription)
				}
				switch {
				case tc.wantDue == nil && got.Due != nil:
					t.Errorf("todoman shows a due time %d, want none", *got.Due)
				case tc.wantDue != nil && (got.Due == nil || *got.Due != *tc.wantDue):
					t.Errorf("todoman shows the due time %v, want %d (%s)", got.Due, *tc.wantDue, time.Unix(*tc.wantDue, 0).UTC())
				}
				list := c.Todo("list")
				line := regexp.MustCompile(`^\[ \] ` + strconv.Itoa(got.ID) + ` +` + regexp.QuoteMeta(tc.line) + ` *$`)
				if !line.MatchString(strings.TrimSpace(list)) {
					t.Errorf("todoman's list shows\n%s\nwant one open task: %q", list, tc.line)
				}
				if show := c.Todo("show", strconv.Itoa(got.ID)); !strings.Contains(show, "Description:\n"+wantDescription) {
					t.Errorf("todoman's show prints\n%s\nwant the description", show)
				}

				// Completed in the client, synced back to the server.
				c.Todo("done", strconv.Itoa(got.ID))
				c.Sync()
				done := s.Stored(name)
				for _, want := range []string{"\r\nSTATUS:COMPLETED\r\n", caldav.PropRequestDigest + ":" + req.RequestDigest + "\r\n", caldav.PropIntentID + ":" + req.IntentID + "\r\n"} {
					// todoman folds long lines (RFC 5545 §3.1).
					if !strings.Contains(unfold(done), want) {
						t.Fatalf("after todoman's done and a sync, the stored task lacks %q:\n%s", want, done)
					}
				}

				// The approval is sent again: replayed, and the completion kept.
				// (Radicale answers vdirsyncer's update with 201 too: the count
				// is compared across the resend.)
				creates := s.Creates(path)
				if res := create(t, a, req); res.Outcome != taskservice.Replayed || res.TaskID != req.IntentID {
					t.Errorf("the resend answered %s (task %q), want replayed (task %q); reason %q", res.Outcome, res.TaskID, req.IntentID, res.Reason)
				}
				if after := s.Stored(name); !bytes.Equal(after, done) {
					t.Errorf("the resend changed the completed task:\nbefore\n%s\nafter\n%s", done, after)
				}
				if n := s.Creates(path); n != creates {
					t.Errorf("the resend made %d more 201 answers for %s in the server's log, want none", n-creates, path)
				}
				c.Sync()
				if todos := c.List(); len(todos) != 1 || !todos[0].Completed {
					t.Errorf("after the resend todoman lists %+v, want the one task, completed", todos)
				}
			})
		}
	}
}

// unfold joins the folded lines of an iCalendar object.
func unfold(b []byte) string {
	return strings.NewReplacer("\r\n ", "", "\r\n\t", "").Replace(string(b))
}

func ptr[T any](v T) *T { return &v }

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
