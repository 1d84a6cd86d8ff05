package redminetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// Issue is one issue as Redmine's REST API lists it.
type Issue struct {
	ID          int
	Subject     string
	Description string
	DueDate     string // YYYY-MM-DD, or empty
	Status      string
	Closed      bool
	// Mark is the value of the mark's custom field ("" when unset).
	Mark string
}

// restIssue is an issue in Redmine's JSON.
type restIssue struct {
	ID          int     `json:"id"`
	Subject     string  `json:"subject"`
	Description *string `json:"description"`
	DueDate     *string `json:"due_date"`
	Status      struct {
		Name     string `json:"name"`
		IsClosed bool   `json:"is_closed"`
	} `json:"status"`
	CustomFields []struct {
		ID    int             `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"custom_fields"`
}

func (s *Server) issueOf(r restIssue) Issue {
	is := Issue{ID: r.ID, Subject: r.Subject, Status: r.Status.Name, Closed: r.Status.IsClosed}
	if r.Description != nil {
		is.Description = *r.Description
	}
	if r.DueDate != nil {
		is.DueDate = *r.DueDate
	}
	for _, cf := range r.CustomFields {
		if cf.ID == s.FieldID {
			var v string
			if json.Unmarshal(cf.Value, &v) == nil {
				is.Mark = v
			}
		}
	}
	return is
}

// Do sends one request to the server's REST API with the administrator's
// key (and a JSON body, when body is not nil, marshalled unless it is
// already []byte) and returns the status and the answer's body. It fails
// the test when the server cannot be reached.
func (s *Server) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	return s.DoWithKey(t, s.APIKey, method, path, body)
}

// DoWithKey is Do with another API key (AddUser's), or none when key is
// empty.
func (s *Server) DoWithKey(t testing.TB, key, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				t.Fatalf("redminetest: encoding the body of %s %s: %v", method, path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	// A loaded Redmine (a test's flood of creates still queued) may take a
	// while to come to a listing.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		t.Fatalf("redminetest: %s %s: %v", method, path, err)
	}
	if key != "" {
		req.Header.Set("X-Redmine-API-Key", key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("redminetest: %s %s: %v (server running: %v)\n%s", method, path, err, s.Running(), s.tails())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("redminetest: reading the answer to %s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// Search lists the issues of the project that GET /issues.json with the
// query q (plus project_id, limit and offset) finds, all pages of them,
// ordered by id. Without a status_id in q, Redmine leaves closed issues
// out.
func (s *Server) Search(t testing.TB, q url.Values) []Issue {
	t.Helper()
	var all []Issue
	for offset := 0; ; {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("project_id", strconv.Itoa(s.ProjectID))
		v.Set("sort", "id")
		v.Set("limit", strconv.Itoa(s.pageSize()))
		v.Set("offset", strconv.Itoa(offset))
		code, b := s.Do(t, http.MethodGet, "/issues.json?"+v.Encode(), nil)
		if code != http.StatusOK {
			t.Fatalf("redminetest: listing issues (%s) answered %d: %s", v.Encode(), code, b)
		}
		var page struct {
			Issues     []restIssue `json:"issues"`
			TotalCount int         `json:"total_count"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("redminetest: decoding the issue listing: %v", err)
		}
		for _, r := range page.Issues {
			all = append(all, s.issueOf(r))
		}
		offset += len(page.Issues)
		if len(page.Issues) == 0 || offset >= page.TotalCount {
			return all
		}
	}
}

func (s *Server) pageSize() int {
	if s.page > 0 {
		return s.page
	}
	return 100 // Redmine's largest
}

// Issues lists all the project's issues, open and closed, ordered by id.
func (s *Server) Issues(t testing.TB) []Issue {
	t.Helper()
	return s.Search(t, url.Values{"status_id": {"*"}})
}

// Issue reads one issue; ok is false when Redmine answers 404.
func (s *Server) Issue(t testing.TB, id int) (is Issue, ok bool) {
	t.Helper()
	code, b := s.Do(t, http.MethodGet, fmt.Sprintf("/issues/%d.json", id), nil)
	if code == http.StatusNotFound {
		return Issue{}, false
	}
	if code != http.StatusOK {
		t.Fatalf("redminetest: reading issue %d answered %d: %s", id, code, b)
	}
	var one struct {
		Issue restIssue `json:"issue"`
	}
	if err := json.Unmarshal(b, &one); err != nil {
		t.Fatalf("redminetest: decoding issue %d: %v", id, err)
	}
	return s.issueOf(one.Issue), true
}

// CreateIssue makes an issue in the project with a subject and, when mark
// is not empty, the mark, as a person or another program would (for a
// duplicate made by hand), and returns its id.
func (s *Server) CreateIssue(t testing.TB, subject, mark string) int {
	t.Helper()
	return s.CreateIssueAs(t, s.APIKey, subject, mark)
}

// CreateIssueAs is CreateIssue as the user whose REST API key is key (one
// AddUser made): the issue's author is that user.
func (s *Server) CreateIssueAs(t testing.TB, key, subject, mark string) int {
	t.Helper()
	issue := map[string]any{"project_id": s.ProjectID, "subject": subject}
	if mark != "" {
		issue["custom_fields"] = []map[string]any{{"id": s.FieldID, "value": mark}}
	}
	code, b := s.DoWithKey(t, key, http.MethodPost, "/issues.json", map[string]any{"issue": issue})
	if code != http.StatusCreated {
		t.Fatalf("redminetest: creating an issue answered %d: %s", code, b)
	}
	var one struct {
		Issue restIssue `json:"issue"`
	}
	if err := json.Unmarshal(b, &one); err != nil || one.Issue.ID == 0 {
		t.Fatalf("redminetest: decoding the created issue (%v): %s", err, b)
	}
	return one.Issue.ID
}

// closedStatus is the id of the status "Closed" in Redmine's default data.
const closedStatus = 5

// CloseIssue sets the issue's status to Closed.
func (s *Server) CloseIssue(t testing.TB, id int) {
	t.Helper()
	code, b := s.Do(t, http.MethodPut, fmt.Sprintf("/issues/%d.json", id),
		map[string]any{"issue": map[string]any{"status_id": closedStatus}})
	if code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("redminetest: closing issue %d answered %d: %s", id, code, b)
	}
}

// DeleteIssue deletes the issue; it fails the test unless Redmine answers
// 204 (404 included: the issue was not there).
func (s *Server) DeleteIssue(t testing.TB, id int) {
	t.Helper()
	code, b := s.Do(t, http.MethodDelete, fmt.Sprintf("/issues/%d.json", id), nil)
	if code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("redminetest: deleting issue %d answered %d: %s", id, code, b)
	}
}

// AddUser makes an active user with login (and a generated password) and,
// when role is not empty, makes it a member of the project with the role
// of that name (Redmine's default roles: "Manager", "Developer",
// "Reporter"; only a Manager may delete issues). It returns the user's
// REST API key.
func (s *Server) AddUser(t testing.TB, login, role string) string {
	t.Helper()
	code, b := s.Do(t, http.MethodPost, "/users.json", map[string]any{"user": map[string]any{
		"login": login, "firstname": login, "lastname": "Test", "mail": login + "@example.invalid",
		"password": "redminetest-" + login + "-password",
	}})
	if code != http.StatusCreated {
		t.Fatalf("redminetest: creating user %q answered %d: %s", login, code, b)
	}
	var user struct {
		User struct {
			ID     int    `json:"id"`
			APIKey string `json:"api_key"`
		} `json:"user"`
	}
	if err := json.Unmarshal(b, &user); err != nil || user.User.ID == 0 {
		t.Fatalf("redminetest: decoding the created user (%v): %s", err, b)
	}
	if role != "" {
		roleID := s.roleID(t, role)
		code, b := s.Do(t, http.MethodPost, fmt.Sprintf("/projects/%d/memberships.json", s.ProjectID),
			map[string]any{"membership": map[string]any{"user_id": user.User.ID, "role_ids": []int{roleID}}})
		if code != http.StatusCreated {
			t.Fatalf("redminetest: making %q a %s of the project answered %d: %s", login, role, code, b)
		}
	}
	// Redmine makes a user's key when it is first asked for; an
	// administrator may read it.
	code, b = s.Do(t, http.MethodGet, fmt.Sprintf("/users/%d.json", user.User.ID), nil)
	if code != http.StatusOK {
		t.Fatalf("redminetest: reading user %q answered %d", login, code)
	}
	if err := json.Unmarshal(b, &user); err != nil || user.User.APIKey == "" {
		t.Fatalf("redminetest: reading the API key of user %q: %v", login, err)
	}
	return user.User.APIKey
}

func (s *Server) roleID(t testing.TB, name string) int {
	t.Helper()
	code, b := s.Do(t, http.MethodGet, "/roles.json", nil)
	if code != http.StatusOK {
		t.Fatalf("redminetest: listing roles answered %d: %s", code, b)
	}
	var roles struct {
		Roles []struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		} `json:"roles"`
	}
	if err := json.Unmarshal(b, &roles); err != nil {
		t.Fatalf("redminetest: decoding the roles: %v", err)
	}
	var names []string
	for _, r := range roles.Roles {
		if r.Name == name {
			return r.ID
		}
		names = append(names, r.Name)
	}
	t.Fatalf("redminetest: no role %q (there are %q)", name, names)
	return 0
}
