package redmine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sendtwice/sendtwice/taskservice"
)

// howToMakeField says how an administrator makes the mark's field.
func (a *Adapter) howToMakeField() string {
	return fmt.Sprintf("an administrator makes it once in Administration » Custom fields » New custom field » Issues: "+
		"format Text, name %q, For all projects, Used as a filter, Searchable, every tracker, visible to any user "+
		"(or, for one project, the project's Settings » Issue tracking enables a field made for some projects)", a.field)
}

// Check reads, creating nothing, that the login is accepted (and which
// user it is: with a mark key, only that user's issues are taken as the
// deployment's), the project exists and the mark's custom field exists
// and can be filtered on; an
// error says which and is permanent when a retry cannot help. What it
// finds is kept: Create, Find, Delete, Issues and Naive check once before
// their first request.
//
// The field is found through GET /custom_fields.json when the API key is
// an administrator's (that list is for administrators only: 403 for anyone
// else), which also says its format and whether it is a filter. For
// another user, Redmine lists no custom field's definition; the field is
// found by name among the project's issue_custom_fields (GET
// /projects/ID.json?include=issue_custom_fields, which lists only the
// fields enabled one by one in the project's settings: on Redmine 5.0 it
// leaves a field "for all projects" out) or among the custom fields of the
// project's latest issue (Redmine shows every field an issue may carry,
// empty or not). So with such a key, a field for all projects is found
// only once the project holds an issue; in an empty project Check refuses
// and says so. Either way, Check then
// asks for the project's issues with a value of the field that no mark
// can have: Redmine ignores a filter on a field that is not "used as a
// filter", so when the project holds issues and that query still finds
// some, the field is refused.
func (a *Adapter) Check(ctx context.Context) error {
	t, err := a.check(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.checked = &t
	a.mu.Unlock()
	return nil
}

// target returns what Check found, checking first when nothing has been
// found yet.
func (a *Adapter) target(ctx context.Context) (target, error) {
	a.mu.Lock()
	t := a.checked
	a.mu.Unlock()
	if t != nil {
		return *t, nil
	}
	if err := a.Check(ctx); err != nil {
		return target{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return *a.checked, nil
}

type namedID struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func (a *Adapter) check(ctx context.Context) (target, error) {
	var me struct {
		User struct {
			ID    int    `json:"id"`
			Login string `json:"login"`
			Admin bool   `json:"admin"`
		} `json:"user"`
	}
	// The answer holds the user's API key: it is read into the fields
	// above only, and never shown.
	if err := a.getJSON(ctx, a.endpoint("users/current.json", nil), "checking the login", &me); err != nil {
		return target{}, err
	}
	if me.User.ID == 0 {
		return target{}, taskservice.Permanent(errors.New("redmine: GET users/current.json answered no user: the API key logs in as nobody"))
	}

	var proj struct {
		Project struct {
			ID                int       `json:"id"`
			Identifier        string    `json:"identifier"`
			IssueCustomFields []namedID `json:"issue_custom_fields"`
		} `json:"project"`
	}
	err := a.getJSON(ctx, a.endpoint("projects/"+url.PathEscape(a.project)+".json", url.Values{"include": {"issue_custom_fields"}}),
		fmt.Sprintf("reading project %q as user %q", a.project, me.User.Login), &proj)
	if err != nil {
		return target{}, err
	}
	t := target{projectID: proj.Project.ID, identifier: proj.Project.Identifier, userID: me.User.ID, userLogin: me.User.Login}
	if t.projectID == 0 {
		return target{}, taskservice.Permanent(fmt.Errorf("redmine: project %q: the answer names no project id", a.project))
	}

	t.fieldID, err = a.findField(ctx, t, proj.Project.IssueCustomFields)
	if err != nil {
		return target{}, err
	}
	if err := a.checkFilter(ctx, t); err != nil {
		return target{}, err
	}
	return t, nil
}

// findField finds the mark's field id (see Check).
func (a *Adapter) findField(ctx context.Context, t target, enabled []namedID) (int, error) {
	var defs struct {
		CustomFields []struct {
			ID             int       `json:"id"`
			Name           string    `json:"name"`
			CustomizedType string    `json:"customized_type"`
			FieldFormat    string    `json:"field_format"`
			IsFilter       bool      `json:"is_filter"`
			Multiple       bool      `json:"multiple"`
			Trackers       []namedID `json:"trackers"`
		} `json:"custom_fields"`
	}
	target := a.endpoint("custom_fields.json", nil)
	resp, body, err := a.exchange(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		// An administrator's key: the definitions say it all.
		if err := jsonInto(body, &defs); err != nil {
			return 0, taskservice.Transient(fmt.Errorf("redmine: GET %s: %w", target, err))
		}
		for _, f := range defs.CustomFields {
			if f.Name != a.field || f.CustomizedType != "issue" {
				continue
			}
			switch {
			case f.FieldFormat != "string":
				return 0, taskservice.Permanent(fmt.Errorf("%w: the issue custom field %q (#%d) has format %q, not Text (string): %s", ErrNoField, a.field, f.ID, f.FieldFormat, a.howToMakeField()))
			case f.Multiple:
				return 0, taskservice.Permanent(fmt.Errorf("%w: the issue custom field %q (#%d) takes multiple values: %s", ErrNoField, a.field, f.ID, a.howToMakeField()))
			case !f.IsFilter:
				return 0, taskservice.Permanent(fmt.Errorf("%w: the issue custom field %q (#%d) is not used as a filter, so issues cannot be looked up by it: tick \"Used as a filter\" in its settings", ErrNoField, a.field, f.ID))
			case len(f.Trackers) == 0:
				return 0, taskservice.Permanent(fmt.Errorf("%w: the issue custom field %q (#%d) is enabled for no tracker: tick every tracker in its settings", ErrNoField, a.field, f.ID))
			}
			return f.ID, nil
		}
		return 0, taskservice.Permanent(fmt.Errorf("%w: Redmine has no issue custom field named %q: %s", ErrNoField, a.field, a.howToMakeField()))
	case http.StatusForbidden:
		// Not an administrator: see Check.
	default:
		return 0, a.statusError(http.MethodGet, target, "reading the custom fields", resp, body)
	}
	for _, f := range enabled {
		if f.Name == a.field {
			return f.ID, nil
		}
	}
	var latest struct {
		Issues []struct {
			CustomFields []namedID `json:"custom_fields"`
		} `json:"issues"`
	}
	err = a.getJSON(ctx, a.issuesURL(t, url.Values{"limit": {"1"}, "sort": {"id:desc"}}), "looking for the mark's field on the project's latest issue", &latest)
	if err != nil {
		return 0, err
	}
	for _, is := range latest.Issues {
		for _, f := range is.CustomFields {
			if f.Name == a.field {
				return f.ID, nil
			}
		}
	}
	return 0, taskservice.Permanent(fmt.Errorf("%w: no issue custom field named %q is visible to this API key's user in project %q: "+
		"a key that is not an administrator's cannot read the custom fields' definitions, and finds the field only on an issue of the project "+
		"(or among the fields enabled in the project's settings, which leave out a field for all projects): if the field exists, create any one issue in the project "+
		"and check again, or check with an administrator's key; if it does not, %s", ErrNoField, a.field, a.project, a.howToMakeField()))
}

// checkFilter refuses a field Redmine does not filter on (see Check).
func (a *Adapter) checkFilter(ctx context.Context, t target) error {
	var all, none struct {
		TotalCount int `json:"total_count"`
	}
	if err := a.getJSON(ctx, a.issuesURL(t, url.Values{"limit": {"1"}}), "counting the project's issues", &all); err != nil {
		return err
	}
	if all.TotalCount == 0 {
		return nil // nothing to tell a filter from none by; the marks are read exactly anyway
	}
	// No mark has an empty scope: no issue can match.
	q := url.Values{"limit": {"1"}, "cf_" + strconv.Itoa(t.fieldID): {MarkVersion + "  "}}
	if err := a.getJSON(ctx, a.issuesURL(t, q), "checking that the mark's field filters", &none); err != nil {
		return err
	}
	if none.TotalCount != 0 {
		return taskservice.Permanent(fmt.Errorf("%w: Redmine ignores a filter on the issue custom field %q (#%d) for this API key's user (a value no issue has still lists %d of %d): it must be \"Used as a filter\" and visible to the user", ErrNoField, a.field, t.fieldID, none.TotalCount, all.TotalCount))
	}
	return nil
}

// issuesURL is GET issues.json of the project (not its subprojects), open
// and closed, with q.
func (a *Adapter) issuesURL(t target, q url.Values) *url.URL {
	v := url.Values{"project_id": {strconv.Itoa(t.projectID)}, "subproject_id": {"!*"}, "status_id": {"*"}}
	for k, vs := range q {
		v[k] = vs
	}
	return a.endpoint("issues.json", v)
}
