package caldav

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-ical"

	"github.com/sendtwice/sendtwice/taskservice"
)

// fullRequest is a request that carries everything a candidate can give.
func fullRequest() taskservice.Request {
	due := "2026-12-01T09:30:00+08:00"
	who := "person-7"
	return taskservice.Request{IntentID: "intent-1", RequestDigest: "sha256:" + strings.Repeat("ab", 32), RequestID: "task-request-1",
		Task:        taskservice.Task{Title: "補上通知設定的檢查項目, again; now", DueAt: &due, AssigneePersonRef: &who},
		CandidateID: "cand-1", SourceVersion: "v3", ApprovedBy: "reviewer@example", CallRef: "APPROVALS:1:1:1",
		Summary:      "Add the notification settings to the checklist;\r\nbefore the release",
		Evidence:     []string{"Can someone add the notification check?", "  ", "I'll do it, by Tuesday 09:30."},
		TranscriptID: "meeting-2026-11-30"}
}

var encodeNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestEncodeTask(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	s := encode(t, fullRequest())
	for _, want := range []string{
		"BEGIN:VTODO\r\n", "UID:intent-1\r\n", "DTSTAMP:20261130T120000Z\r\n", "CREATED:20261130T120000Z\r\n",
		"STATUS:NEEDS-ACTION\r\n", "SUMMARY:補上通知設定的檢查項目\\, again\\; now\r\n",
		"DESCRIPTION:Add the notification settings to the checklist\\;\\nbefore the release\\n\\n" +
			"Evidence:\\n- “Can someone add the notification check?”\\n- “I'll do it\\, by Tuesday 09:30.”\\n\\n" +
			"Transcript: meeting-2026-11-30\\nSource version: v3\r\n",
		"X-SENDTWICE-INTENT-ID:intent-1\r\n", "X-SENDTWICE-SCOPE:default\r\n", "X-SENDTWICE-REQUEST-DIGEST:" + digest + "\r\n",
		"X-SENDTWICE-REQUEST-ID:task-request-1\r\n", "X-SENDTWICE-CANDIDATE-ID:cand-1\r\n",
		"X-SENDTWICE-SOURCE-VERSION:v3\r\n", "X-SENDTWICE-APPROVED-BY:reviewer@example\r\n",
		"X-SENDTWICE-ASSIGNEE-REF:person-7\r\n", "X-SENDTWICE-CALL-REF:APPROVALS:1:1:1\r\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "ATTENDEE") || strings.Contains(s, "ORGANIZER") {
		t.Errorf("an assignee reference became an address:\n%s", s)
	}
	// What a client reads back: the marks the adapter relies on, and the
	// description as plain lines.
	cal, err := ical.NewDecoder(strings.NewReader(s)).Decode()
	if err != nil {
		t.Fatalf("the encoded task does not decode: %v\n%s", err, s)
	}
	todo := findTodo(cal)
	if todo == nil || propText(todo, PropRequestDigest) != digest || propText(todo, PropIntentID) != "intent-1" {
		t.Fatalf("the marks do not read back:\n%s", s)
	}
	wantDesc := "Add the notification settings to the checklist;\nbefore the release\n\n" +
		"Evidence:\n- “Can someone add the notification check?”\n- “I'll do it, by Tuesday 09:30.”\n\n" +
		"Transcript: meeting-2026-11-30\nSource version: v3"
	if got := propText(todo, ical.PropDescription); got != wantDesc {
		t.Errorf("the description reads back as\n%q\nwant\n%q", got, wantDesc)
	}
}

func TestEncodeTaskLeavesOutWhatTheRequestDoesNotSay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*taskservice.Request)
		want   []string
		never  []string
	}{
		{"no due date and no assignee: no DUE, no time zone and no assignee", func(r *taskservice.Request) { r.Task.DueAt, r.Task.AssigneePersonRef = nil, nil },
			[]string{"STATUS:NEEDS-ACTION\r\n"}, []string{"DUE", "VTIMEZONE", "ATTENDEE", "ASSIGNEE"}},
		{"nothing from the candidate: no description", func(r *taskservice.Request) {
			r.Summary, r.Evidence, r.TranscriptID, r.SourceVersion = "", nil, "", ""
		}, []string{"SUMMARY:"}, []string{"DESCRIPTION"}},
		{"only evidence: the quotes alone", func(r *taskservice.Request) {
			r.Summary, r.TranscriptID, r.SourceVersion = "", "", ""
			r.Evidence = []string{"one", "two"}
		}, []string{"DESCRIPTION:Evidence:\\n- “one”\\n- “two”\r\n"}, []string{"Transcript", "Source version"}},
		{"only the source: the transcript and its version", func(r *taskservice.Request) {
			r.Summary, r.Evidence = "", nil
		}, []string{"DESCRIPTION:Transcript: meeting-2026-11-30\\nSource version: v3\r\n"}, []string{"Evidence"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := fullRequest()
			tc.change(&req)
			s := encode(t, req)
			for _, want := range tc.want {
				if !strings.Contains(s, want) {
					t.Errorf("missing %q in\n%s", want, s)
				}
			}
			for _, never := range tc.never {
				if strings.Contains(s, never) {
					t.Errorf("%s is written:\n%s", never, s)
				}
			}
		})
	}
}

func TestTheDueDateKeepsTheZoneTheRequestGave(t *testing.T) {
	for _, tc := range []struct {
		name, due string
		want      []string
		instant   time.Time // zero for a date
	}{
		{"an offset east of UTC is a TZID with a fixed-offset VTIMEZONE", "2026-12-24T09:30:00+08:00", []string{
			"DUE;TZID=\"UTC+08:00\":20261224T093000\r\n",
			"BEGIN:VTIMEZONE\r\nTZID:UTC+08:00\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\nTZNAME:UTC+08:00\r\nTZOFFSETFROM:+0800\r\nTZOFFSETTO:+0800\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n",
		}, time.Date(2026, 12, 24, 1, 30, 0, 0, time.UTC)},
		{"an offset west of UTC with minutes keeps them", "2026-12-24T09:30:15-03:30", []string{
			"DUE;TZID=\"UTC-03:30\":20261224T093015\r\n", "TZOFFSETFROM:-0330\r\n", "TZOFFSETTO:-0330\r\n",
		}, time.Date(2026, 12, 24, 13, 0, 15, 0, time.UTC)},
		{"fractions of a second are dropped", "2026-12-24T09:30:00.75+05:45", []string{
			"DUE;TZID=\"UTC+05:45\":20261224T093000\r\n",
		}, time.Date(2026, 12, 24, 3, 45, 0, 0, time.UTC)},
		{"Z is UTC, without a time zone", "2026-12-24T01:30:00Z", []string{"DUE:20261224T013000Z\r\n"}, time.Date(2026, 12, 24, 1, 30, 0, 0, time.UTC)},
		{"+00:00 is UTC, without a time zone", "2026-12-24T01:30:00+00:00", []string{"DUE:20261224T013000Z\r\n"}, time.Date(2026, 12, 24, 1, 30, 0, 0, time.UTC)},
		{"a date is a DATE", "2026-12-24", []string{"DUE;VALUE=DATE:20261224\r\n"}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := fullRequest()
			req.Task.DueAt = &tc.due
			s := encode(t, req)
			for _, want := range tc.want {
				if !strings.Contains(s, want) {
					t.Errorf("missing %q in\n%s", want, s)
				}
			}
			if tc.instant.IsZero() {
				if strings.Contains(s, "VTIMEZONE") || strings.Contains(s, "TZID") {
					t.Errorf("a date got a time zone:\n%s", s)
				}
				return
			}
			// The DUE reads back as the same instant, through the
			// VTIMEZONE written beside it.
			cal, err := ical.NewDecoder(strings.NewReader(s)).Decode()
			if err != nil {
				t.Fatalf("does not decode: %v", err)
			}
			prop := findTodo(cal).Props.Get(ical.PropDue)
			got, err := prop.DateTime(time.UTC)
			if tzid := prop.Params.Get(ical.PropTimezoneID); tzid != "" {
				got, err = time.ParseInLocation("20060102T150405", prop.Value, zoneOf(t, cal, tzid))
			}
			if err != nil {
				t.Fatalf("DUE does not read back: %v", err)
			}
			if !got.Equal(tc.instant) {
				t.Errorf("DUE reads back as %v, want %v", got.UTC(), tc.instant)
			}
		})
	}
}

// zoneOf reads the fixed offset of the VTIMEZONE tzid in cal.
func zoneOf(t *testing.T, cal *ical.Calendar, tzid string) *time.Location {
	t.Helper()
	for _, c := range cal.Children {
		if c.Name != ical.CompTimezone || propText(c, ical.PropTimezoneID) != tzid {
			continue
		}
		for _, o := range c.Children {
			if p := o.Props.Get(ical.PropTimezoneOffsetTo); p != nil {
				off, err := time.Parse("-0700", p.Value)
				if err != nil {
					t.Fatalf("TZOFFSETTO %q: %v", p.Value, err)
				}
				_, secs := off.Zone()
				return time.FixedZone(tzid, secs)
			}
		}
	}
	t.Fatalf("no VTIMEZONE %q", tzid)
	return nil
}

func TestEncodeTaskRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		change     func(*taskservice.Request)
	}{
		{"a due date that is not RFC 3339", "neither an RFC 3339 date-time nor a date", func(r *taskservice.Request) { s := "next week"; r.Task.DueAt = &s }},
		{"a malformed digest", "request digest", func(r *taskservice.Request) { r.RequestDigest = "sha256:AB" }},
		{"an empty title", "title is empty", func(r *taskservice.Request) { r.Task.Title = " " }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := fullRequest()
			tc.change(&req)
			_, err := encodeTask(req, TaskID(req.KeyScope(), req.IntentID), "", encodeNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "caldav: ") {
				t.Errorf("error %v, want one that says %q", err, tc.want)
			}
		})
	}
}

func TestTextEscapingRoundTrips(t *testing.T) {
	for _, s := range []string{"plain", `a\b`, "a,b;c", "line\nbreak", `\n literally`} {
		if got := unescapeText(escapeText(s)); got != s {
			t.Errorf("%q → %q → %q", s, escapeText(s), got)
		}
	}
}

func encode(t *testing.T, req taskservice.Request) string {
	t.Helper()
	b, err := encodeTask(req, TaskID(req.KeyScope(), req.IntentID), "", encodeNow)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
