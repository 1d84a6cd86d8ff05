package caldav

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

func TestNewRefusesABadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{}, "CollectionURL is empty"},
		{"a relative URL", Config{CollectionURL: "/alice/tasks/"}, "scheme must be http or https"},
		{"another scheme", Config{CollectionURL: "ftp://dav.example/tasks/"}, "scheme must be http or https"},
		{"no host", Config{CollectionURL: "http:///tasks/"}, "names no host"},
		{"a password in the URL", Config{CollectionURL: "https://alice:secret@dav.example/tasks/"}, "must not carry a user or password"},
		{"a query", Config{CollectionURL: "https://dav.example/tasks/?x=1"}, "query or a fragment"},
		{"a fragment", Config{CollectionURL: "https://dav.example/tasks/#x"}, "query or a fragment"},
		{"a colon in the user", Config{CollectionURL: "https://dav.example/tasks/", Username: "a:b"}, "Username must not contain"},
		{"a password without a user", Config{CollectionURL: "https://dav.example/tasks/", Password: "secret"}, "Username is empty"},
		{"a negative timeout", Config{CollectionURL: "https://dav.example/tasks/", Timeout: -time.Second}, "Timeout"},
		{"a negative connection bound", Config{CollectionURL: "https://dav.example/tasks/", MaxConns: -1}, "MaxConns"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "caldav: ") {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

func TestStoreIDIsTheNormalizedCollection(t *testing.T) {
	ids := map[string]bool{}
	for _, u := range []string{"https://DAV.example:443/alice/tasks", "https://dav.example/alice/tasks/", "https://dav.example/alice//tasks/./"} {
		a, err := New(Config{CollectionURL: u})
		if err != nil {
			t.Fatal(err)
		}
		if a.CollectionURL() != "https://dav.example/alice/tasks/" {
			t.Errorf("%s normalizes to %s", u, a.CollectionURL())
		}
		ids[a.StoreID()] = true
		if !strings.HasPrefix(a.StoreID(), "caldav-") || len(a.StoreID()) != len("caldav-")+16 {
			t.Errorf("store id %q", a.StoreID())
		}
		if a.Scope() != "each caller scope, in the collection https://dav.example/alice/tasks/" {
			t.Errorf("scope %q", a.Scope())
		}
	}
	if len(ids) != 1 {
		t.Errorf("one collection, several store ids: %v", ids)
	}
	other, _ := New(Config{CollectionURL: "https://dav.example/bob/tasks/"})
	if ids[other.StoreID()] {
		t.Errorf("two collections, one store id")
	}
}

func TestEncodeTask(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	due := "2026-12-01T09:30:00+08:00"
	who := "person-7"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	req := taskservice.Request{IntentID: "intent-1", RequestDigest: digest, RequestID: "task-request-1",
		Task:        taskservice.Task{Title: "補上通知設定的檢查項目, again; now", DueAt: &due, AssigneePersonRef: &who},
		CandidateID: "cand-1", SourceVersion: "v3", ApprovedBy: "reviewer@example", CallRef: "APPROVALS:1:1:1"}
	b, err := encodeTask(req, now)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"BEGIN:VTODO\r\n", "UID:intent-1\r\n", "DTSTAMP:20261130T120000Z\r\n",
		"SUMMARY:補上通知設定的檢查項目\\, again\\; now\r\n", "DUE:20261201T013000Z\r\n",
		"X-SENDTWICE-INTENT-ID:intent-1\r\n", "X-SENDTWICE-REQUEST-DIGEST:" + digest + "\r\n",
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

	req.Task.DueAt, req.Task.AssigneePersonRef = nil, nil
	b, err = encodeTask(req, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, never := range []string{"DUE", "ATTENDEE", "ASSIGNEE"} {
		if strings.Contains(string(b), never) {
			t.Errorf("no due date and no assignee, but %s is written:\n%s", never, b)
		}
	}

	date := "2026-12-01"
	req.Task.DueAt = &date
	if b, err = encodeTask(req, now); err != nil || !strings.Contains(string(b), "DUE;VALUE=DATE:20261201\r\n") {
		t.Errorf("a due date: %v\n%s", err, b)
	}
	bad := "next week"
	req.Task.DueAt = &bad
	if _, err = encodeTask(req, now); err == nil {
		t.Errorf("a due date that is not RFC 3339 was accepted")
	}
	req.Task.DueAt = nil
	req.RequestDigest = "sha256:AB"
	if _, err = encodeTask(req, now); err == nil {
		t.Errorf("a malformed digest was accepted")
	}
}

func TestTextEscapingRoundTrips(t *testing.T) {
	for _, s := range []string{"plain", `a\b`, "a,b;c", "line\nbreak", `\n literally`} {
		if got := unescapeText(escapeText(s)); got != s {
			t.Errorf("%q → %q → %q", s, escapeText(s), got)
		}
	}
}

func TestStatusClassification(t *testing.T) {
	a, err := New(Config{CollectionURL: "https://dav.example/alice/tasks/", Username: "alice", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := a.resourceURL(taskservice.DefaultScope, "intent-1")
	for _, c := range []struct {
		code      int
		put       bool
		permanent bool
		says      string
	}{
		{500, true, false, "500"},
		{502, true, false, "502"},
		{503, true, false, "503"},
		{507, true, false, "507"},
		{408, true, false, "408"},
		{429, true, false, "429"},
		{401, true, true, `credentials of user "alice" were refused`},
		{403, true, true, `user "alice" may not write`},
		{404, true, true, "does not exist"},
		{409, true, true, "does not exist"},
		{301, true, true, "not followed"},
		{400, true, true, "400"},
		{415, true, true, "415"},
	} {
		resp := &http.Response{StatusCode: c.code, Status: fmt.Sprintf("%d %s", c.code, http.StatusText(c.code)), Header: http.Header{}}
		err := a.statusError("PUT", target, resp, c.put)
		if taskservice.IsPermanent(err) != c.permanent || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprint(c.code)) {
			t.Errorf("%d: %v (permanent %v); want permanent %v, saying %q", c.code, err, taskservice.IsPermanent(err), c.permanent, c.says)
		}
		if !c.permanent && !errors.Is(err, taskservice.ErrTransient) {
			t.Errorf("%d: not marked transient: %v", c.code, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%d: the error shows the password", c.code)
		}
	}
}
