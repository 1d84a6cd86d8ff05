package redminetest

import (
	"encoding/json"
	"fmt"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// post sends the POST /issues.json the adapter sends: the project, a
// subject, a due date and the mark in its custom field.
func post(t *testing.T, s *Server, subject, mark string) {
	t.Helper()
	code, b := s.Do(t, http.MethodPost, "/issues.json", map[string]any{"issue": map[string]any{
		"project_id":    s.ProjectID,
		"subject":       subject,
		"description":   "made by the self-test",
		"due_date":      "2020-01-02",
		"custom_fields": []map[string]any{{"id": s.FieldID, "value": mark}},
	}})
	if code != http.StatusCreated {
		t.Fatalf("POST /issues.json answered %d: %s", code, b)
	}
}

func ids(issues []Issue) []int {
	var out []int
	for _, is := range issues {
		out = append(out, is.ID)
	}
	return out
}

// wantPosts fails t unless the server has received and created the
// number of POSTs given; what names the moment.
func wantPosts(t *testing.T, s *Server, received, created int, what string) {
	t.Helper()
	if r, c := s.Posts(); r != received || c != created {
		t.Fatalf("%s: %d received, %d created, want %d and %d", what, r, c, received, created)
	}
}

func TestServer(t *testing.T) {
	s := Start(t, Options{})
	if s.APIKey == "" || s.ProjectID == 0 || s.FieldID == 0 || s.Project != "redminetest" || s.FieldName != DefaultFieldName {
		t.Fatalf("server fields: project %q (%d), field %q (%d), API key set: %v", s.Project, s.ProjectID, s.FieldName, s.FieldID, s.APIKey != "")
	}
	const mark = "st1 tenant-a intent%2F1 d1"

	t.Run("a fresh server has no issues and no posts", func(t *testing.T) {
		if got := s.Issues(t); len(got) != 0 {
			t.Fatalf("issues: %+v", got)
		}
		wantPosts(t, s, 0, 0, "posts")
	})

	t.Run("a POST with the mark makes one issue that lists with its mark", func(t *testing.T) {
		post(t, s, "first", mark)
		got := s.Issues(t)
		if len(got) != 1 || got[0].Subject != "first" || got[0].Mark != mark || got[0].Closed ||
			got[0].DueDate != "2020-01-02" || got[0].Description != "made by the self-test" {
			t.Fatalf("issues: %+v", got)
		}
		wantPosts(t, s, 1, 1, "posts")
	})

	t.Run("a second identical POST makes a second issue: Redmine keeps no key", func(t *testing.T) {
		post(t, s, "first", mark)
		got := s.Issues(t)
		if len(got) != 2 || got[0].ID == got[1].ID || got[1].Mark != mark || got[0].Mark != mark {
			t.Fatalf("issues after the same POST twice: %+v", got)
		}
		wantPosts(t, s, 2, 2, "posts")
	})

	t.Run("a refused POST counts as received, not created", func(t *testing.T) {
		code, _ := s.Do(t, http.MethodPost, "/issues.json", map[string]any{"issue": map[string]any{"project_id": 999999, "subject": "nowhere"}})
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("a POST to an unknown project answered %d", code)
		}
		wantPosts(t, s, 3, 2, "posts")
	})

	t.Run("a closed issue is still listed", func(t *testing.T) {
		first := s.Issues(t)[0].ID
		s.CloseIssue(t, first)
		is, ok := s.Issue(t, first)
		if !ok || !is.Closed {
			t.Fatalf("issue %d after closing: %+v (found %v)", first, is, ok)
		}
		got := s.Issues(t)
		if len(got) != 2 || !got[0].Closed || got[1].Closed {
			t.Fatalf("issues: %+v", got)
		}
	})

	t.Run("a listing of several pages holds every issue", func(t *testing.T) {
		whole := s.Issues(t)
		s.page = 1
		defer func() { s.page = 0 }()
		if got := s.Issues(t); len(whole) < 2 || !slices.Equal(got, whole) {
			t.Fatalf("one issue a page: %+v, all at once: %+v", got, whole)
		}
	})

	t.Run("a restart keeps the issues, the port and the log", func(t *testing.T) {
		before := s.Issues(t)
		url := s.URL
		s.Restart()
		if !s.Running() || s.URL != url {
			t.Fatalf("after a restart: running %v, URL %s (was %s)", s.Running(), s.URL, url)
		}
		if got := s.Issues(t); !slices.Equal(got, before) {
			t.Fatalf("issues after a restart: %+v, before: %+v", got, before)
		}
		wantPosts(t, s, 3, 2, "posts after a restart")
	})

	t.Run("DeleteIssue removes one issue", func(t *testing.T) {
		issues := s.Issues(t)
		s.DeleteIssue(t, issues[1].ID)
		if got := s.Issues(t); len(got) != 1 || got[0].ID != issues[0].ID {
			t.Fatalf("issues after deleting %d: %+v", issues[1].ID, got)
		}
		if _, ok := s.Issue(t, issues[1].ID); ok {
			t.Fatalf("issue %d is still readable", issues[1].ID)
		}
	})

	t.Run("a POST whose answer is lost still makes its issue, seen through davtest's proxy", func(t *testing.T) {
		before := s.Issues(t)
		p := davtest.NewProxy(t, s.URL)
		p.DropResponses(1)
		body := `{"issue":{"project_id":` + strconv.Itoa(s.ProjectID) + `,"subject":"lost","custom_fields":[{"id":` + strconv.Itoa(s.FieldID) + `,"value":"st1 lost"}]}}`
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/issues.json", strings.NewReader(body))
		req.Header.Set("X-Redmine-API-Key", s.APIKey)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the proxy passed the answer on: %d", resp.StatusCode)
		}
		got := s.Issues(t)
		if len(got) != len(before)+1 || got[len(got)-1].Mark != "st1 lost" {
			t.Fatalf("issues after a lost answer: %+v", got)
		}
		wantPosts(t, s, 4, 3, "posts")
	})

	t.Run("AddUser makes users with the role asked for, or none", func(t *testing.T) {
		reporter := s.AddUser(t, "reporter", "Reporter")
		outsider := s.AddUser(t, "outsider", "")
		if reporter == "" || outsider == "" || reporter == outsider || reporter == s.APIKey {
			t.Fatal("the users' API keys are empty or not their own")
		}
		issue := map[string]any{"issue": map[string]any{"project_id": s.ProjectID, "subject": "by a reporter"}}
		code, b := s.DoWithKey(t, reporter, http.MethodPost, "/issues.json", issue)
		if code != http.StatusCreated {
			t.Fatalf("a reporter's POST answered %d: %s", code, b)
		}
		var made struct{ Issue struct{ ID int } }
		if err := json.Unmarshal(b, &made); err != nil {
			t.Fatalf("reading the created issue: %v", err)
		}
		const wrongKey = "0123456789abcdef0123456789abcdef01234567"
		for _, c := range []struct {
			name, key, method, path string
			body                    any
			want                    int
		}{
			{"a reporter may not delete", reporter, http.MethodDelete, "/issues/" + strconv.Itoa(made.Issue.ID) + ".json", nil, http.StatusForbidden},
			{"an outsider may not list the private project", outsider, http.MethodGet, "/issues.json?project_id=" + strconv.Itoa(s.ProjectID), nil, http.StatusForbidden},
			{"an outsider's create in it is refused as one with no project", outsider, http.MethodPost, "/issues.json", issue, http.StatusUnprocessableEntity},
			{"a request with no key may not list it", "", http.MethodGet, "/issues.json?project_id=" + strconv.Itoa(s.ProjectID), nil, http.StatusUnauthorized},
			{"a wrong key may not list it", wrongKey, http.MethodGet, "/issues.json?project_id=" + strconv.Itoa(s.ProjectID), nil, http.StatusUnauthorized},
			{"a wrong key may not read the current user", wrongKey, http.MethodGet, "/users/current.json", nil, http.StatusUnauthorized},
			{"a wrong key is taken as anonymous: a listing of no project answers, empty", wrongKey, http.MethodGet, "/issues.json?status_id=*", nil, http.StatusOK},
			{"the outsider may read itself", outsider, http.MethodGet, "/users/current.json", nil, http.StatusOK},
		} {
			if code, b := s.DoWithKey(t, c.key, c.method, c.path, c.body); code != c.want {
				t.Errorf("%s: %s %s answered %d, want %d: %.200s", c.name, c.method, c.path, code, c.want, b)
			}
		}
		s.DeleteIssue(t, made.Issue.ID)
	})

	t.Run("a server that dies is reported with the end of its log", func(t *testing.T) {
		pid := s.proc.Pid()
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		for s.Running() {
			time.Sleep(10 * time.Millisecond)
		}
		f := &fakeTB{TB: t}
		f.run(func() { s.Issues(f) })
		if f.ended != "fatal" || !strings.Contains(f.msg, "server running: false") ||
			!strings.Contains(f.msg, "the end of Redmine's log") || !strings.Contains(f.msg, "] Started ") {
			t.Fatalf("the failure (%s): %s", f.ended, f.msg)
		}
		if strings.Contains(f.msg, s.APIKey) {
			t.Fatal("the failure shows the API key")
		}
	})

	t.Run("Stop stops it, and a second Stop does nothing", func(t *testing.T) {
		s.Stop()
		if s.Running() {
			t.Fatal("running after Stop")
		}
		if resp, err := http.Get(s.URL + "/"); err == nil {
			resp.Body.Close()
			t.Fatal("the stopped server still answers")
		}
		s.Stop()
	})
}

// fakeTB records how a helper ends a test, without ending the real one.
type fakeTB struct {
	testing.TB
	ended, msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.ended, f.msg = "fatal", fmt.Sprintf(format, a...)
	runtime.Goexit()
}
func (f *fakeTB) Fatal(a ...any) {
	f.ended, f.msg = "fatal", fmt.Sprint(a...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, a ...any) {
	f.ended, f.msg = "skip", fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// run calls fn on a goroutine of its own, which Fatalf and Skipf end.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	<-done
}

// TestRequire changes required, so it must never be parallel: parallel
// tests that Start servers run after every sequential test.
func TestRequire(t *testing.T) {
	saved := required
	t.Cleanup(func() { required = saved })
	required = append(slices.Clone(saved), struct{ path, pkg string }{"/nonexistent/redminetest/puma", "puma"})
	for _, c := range []struct {
		name, ci, ended, says string
	}{
		{"a missing package skips the test outside CI", "", "skip", "with CI=true this fails instead"},
		{"a missing package fails the test under CI=true", "true", "fatal", "/nonexistent/redminetest/puma is missing (Debian's puma package"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			f := &fakeTB{TB: t}
			f.run(func() { Require(f) })
			if f.ended != c.ended || !strings.Contains(f.msg, c.says) {
				t.Fatalf("Require ended with %q: %s", f.ended, f.msg)
			}
		})
	}
	t.Run("nothing missing lets the test go on", func(t *testing.T) {
		required = saved
		f := &fakeTB{TB: t}
		f.run(func() { Require(f) })
		if f.ended != "" {
			t.Skipf("Redmine is not installed here: %s", f.msg)
		}
	})
}

// TestFilters records what Redmine 5.0's issue filters on a string custom
// field find, which the adapter's look-up relies on (see the package
// documentation).
func TestFilters(t *testing.T) {
	s := Start(t, Options{})
	cf := "cf_" + strconv.Itoa(s.FieldID)
	marks := map[string]string{
		"plain":                "st1 tenant-a intent%2F1 d1",
		"plain-twin":           "st1 tenant-a intent%2F1 d2",
		"upper":                "ST1 TENANT-A INTENT%2F1 D1",
		"longer":               "st1 tenant-a intent%2F10 d1",
		"spaces":               "st1 tenant b intent 1 d3",
		"special":              "st1 a+b&c%d é日本 d4",
		"pipe":                 "st1 a|b i d5",
		"underscore":           "st1 a_b i d6",
		"underscore-lookalike": "st1 axb i d6",
		"unicode-upper":        "st1 É i d7",
		"padded":               " st1 padded d8 ",
	}
	id := map[string]int{}
	for name, m := range marks {
		id[name] = s.CreateIssue(t, name, m)
	}
	s.CloseIssue(t, id["plain"])
	want := func(names ...string) []int {
		var out []int
		for _, n := range names {
			out = append(out, id[n])
		}
		slices.Sort(out)
		return out
	}
	exact := func(v string, extra ...string) url.Values {
		q := url.Values{cf: {v}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		return q
	}
	long := func(op, v string, extra ...string) url.Values {
		q := url.Values{"f[]": {cf}, "op[" + cf + "]": {op}, "v[" + cf + "][]": {v}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		return q
	}
	for _, c := range []struct {
		name string
		q    url.Values
		want []int
	}{
		{"the short exact filter finds the value, case and all, but no closed issue without status_id",
			exact(marks["plain"]), want()},
		{"the short exact filter with status_id=* finds a closed issue too",
			exact(marks["plain"], "status_id", "*"), want("plain")},
		{"the short exact filter is case-sensitive",
			exact(marks["upper"], "status_id", "*"), want("upper")},
		{"the short exact filter finds values with spaces, +, &, % and unicode",
			exact(marks["special"], "status_id", "*"), want("special")},
		{"the short exact filter splits its value at | into alternatives, so it misses a value with |",
			exact(marks["pipe"], "status_id", "*"), want()},
		{"the short exact filter keeps leading and trailing spaces",
			exact(marks["padded"], "status_id", "*"), want("padded")},
		{"a value starting with an operator is read as one in the short form (^ is starts-with)",
			exact("^st1 tenant-a intent%2F1 ", "status_id", "*"), want("plain", "plain-twin", "upper")},
		{"the long exact filter finds a value with |",
			long("=", marks["pipe"]), want("pipe")},
		{"the long form replaces the default open-only status filter, so it finds closed issues",
			long("=", marks["plain"]), want("plain")},
		{"the long form ignores a short status_id beside it",
			long("=", marks["plain"], "status_id", "o"), want("plain")},
		{"the long form with its own status filter * finds closed issues",
			long("=", marks["plain"], "f[]", "status_id", "op[status_id]", "*"), want("plain")},
		{"the long form with its own status filter o leaves them out",
			long("=", marks["plain"], "f[]", "status_id", "op[status_id]", "o"), want()},
		{"starts-with matches a prefix ending in a space, and ignores ASCII case",
			long("^", "st1 tenant-a intent%2F1 "), want("plain", "plain-twin", "upper")},
		{"starts-with takes % literally",
			long("^", "st1 tenant-a intent%2F1"), want("plain", "plain-twin", "upper", "longer")},
		{"starts-with takes _ literally",
			long("^", "st1 a_b "), want("underscore")},
		{"starts-with finds values with spaces, +, &, % and unicode",
			long("^", "st1 a+b&c%d é日本 "), want("special")},
		{"starts-with does not fold the case of non-ASCII letters",
			long("^", "st1 é"), want()},
		{"starts-with finds a value with |",
			long("^", "st1 a|b "), want("pipe")},
		{"a filter on a custom field that does not exist is dropped: the whole project is listed",
			url.Values{"cf_999999": {"nothing"}, "status_id": {"*"}}, want(slices.Collect(maps.Keys(marks))...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(s.Search(t, c.q)); !slices.Equal(got, c.want) {
				t.Errorf("GET /issues.json?%s found %v, want %v", c.q.Encode(), got, c.want)
			}
		})
	}

	t.Run("an empty starts-with value is refused with 422", func(t *testing.T) {
		q := long("^", "")
		q.Set("project_id", strconv.Itoa(s.ProjectID))
		if code, b := s.Do(t, http.MethodGet, "/issues.json?"+q.Encode(), nil); code != http.StatusUnprocessableEntity {
			t.Errorf("answered %d: %s", code, b)
		}
	})

	t.Run("a field that is not a filter is dropped from the query like an unknown one", func(t *testing.T) {
		s.Rails(t, "CustomField.find("+strconv.Itoa(s.FieldID)+").update!(is_filter: false)")
		all := want(slices.Collect(maps.Keys(marks))...)
		if got := ids(s.Search(t, exact(marks["special"], "status_id", "*"))); !slices.Equal(got, all) {
			t.Errorf("found %v, want the whole project %v", got, all)
		}
		if out := s.Rails(t, "print CustomField.find("+strconv.Itoa(s.FieldID)+").is_filter"); out != "false" {
			t.Errorf("Rails printed %q", out)
		}
	})
}

func TestParallelServersHaveTheirOwnDatabases(t *testing.T) {
	for _, name := range []string{"one", "two"} {
		t.Run("server "+name+" sees only its own issue", func(t *testing.T) {
			t.Parallel()
			s := Start(t, Options{})
			id := s.CreateIssue(t, name, "st1 "+name)
			if got := s.Issues(t); len(got) != 1 || got[0].ID != id || got[0].Subject != name {
				t.Fatalf("issues: %+v", got)
			}
		})
	}
}

func TestFieldName(t *testing.T) {
	s := Start(t, Options{FieldName: "another key"})
	code, b := s.Do(t, http.MethodGet, "/custom_fields.json", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /custom_fields.json answered %d", code)
	}
	if !strings.Contains(string(b), `"id":`+strconv.Itoa(s.FieldID)+`,"name":"another key"`) {
		t.Fatalf("custom fields: %s", b)
	}
}
