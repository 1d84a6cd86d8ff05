package redmine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// releaseTimeout bounds a lock's release, which runs even when the call's
// context has ended.
const releaseTimeout = 5 * time.Second

// Create keeps the contract for a service with no key. It looks the key up
// among the project's issues, open and closed; when nothing carries it and
// the key is in doubt (an earlier create's outcome is unknown: see below),
// it creates nothing and returns an error marked taskservice.InDoubt with
// the time until which the earlier create may still land. Otherwise it
// takes the key's lock (waiting, polling every LockPoll, while another
// caller holds it; when ctx ends first, the error is transient and wraps
// taskservice.ErrLocked) and looks again. It answers:
//
//   - one issue with req's digest → Replayed, its id;
//   - one issue with another digest → Conflict, nothing changed;
//   - two or more → a permanent error naming them (ErrDuplicates);
//   - none → it writes the key's in-doubt record (taskservice.Doubts; one
//     written meanwhile by another caller → InDoubt), checks the lock
//     (Lock.Held) and creates the issue with the mark → Created.
//
// While the create is in flight the lock is renewed. The record is
// removed once Redmine has answered definitely (the issue, or a refusal
// that created nothing), when the create never left (its connection could
// not be made), and whenever a lookup finds the key's issue; when
// the answer is lost (a timeout, a lost connection, a 5xx, a caller
// killed), the create may still land, and the record stays for the
// request lifetime: until then no one creates, even with the lock expired
// or purged, and a retry that finds the issue answers Replayed. The lock
// is released once the create is done.
func (a *Adapter) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	issue, t, err := a.prepare(ctx, req)
	if err != nil {
		return a.none(), err
	}
	// A key that an issue carries already is answered without its lock:
	// an issue leaves only by a deletion, which the intent ledger covers,
	// so the answer cannot change under us. This also answers the
	// redelivery of a create whose reply was lost at once.
	found, ignored, err := a.lookup(ctx, t, req.KeyScope(), req.IntentID)
	if err != nil {
		return a.none(), err
	}
	if len(found) > 0 {
		a.settle(ctx, req)
		return a.answer(req, found, ignored)
	}
	// A key in doubt is found under the lock (createInDoubt): while its
	// lock is held, the create that wrote the record is still in flight,
	// and waiting for it answers sooner than a redelivery would.
	lk, err := a.lock(ctx, req.KeyScope(), req.IntentID)
	if err != nil {
		return a.none(), err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_ = lk.Release(rctx) // an error leaves the lock to its TTL
	}()

	// Again under the lock: another caller may have created since.
	found, ignored, err = a.lookup(ctx, t, req.KeyScope(), req.IntentID)
	if err != nil {
		return a.none(), err
	}
	if len(found) > 0 {
		a.settle(ctx, req)
		return a.answer(req, found, ignored)
	}
	res, err := a.createInDoubt(ctx, t, req, issue, lk)
	if err == nil {
		res.Reason = notFor(ignored)
	}
	return res, err
}

func (a *Adapter) none() taskservice.Result { return taskservice.Result{StoreID: a.storeID} }

// lock takes the key's lock, waiting for another holder to give it up.
func (a *Adapter) lock(ctx context.Context, scope, intentID string) (taskservice.Lock, error) {
	for {
		lk, err := a.locks.Lock(ctx, scope, intentID, a.lockTTL)
		if err == nil {
			return lk, nil
		}
		if !errors.Is(err, taskservice.ErrLocked) {
			return nil, taskservice.Transient(fmt.Errorf("redmine: taking the lock of intent %q in scope %q: %w", intentID, scope, err))
		}
		timer := time.NewTimer(randomPoll(a.lockPoll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, taskservice.Transient(fmt.Errorf("redmine: waiting for the lock of intent %q in scope %q until the call ended (%w): %w", intentID, scope, context.Cause(ctx), err))
		case <-timer.C:
		}
	}
}

// Find looks the key up, creating nothing (taskservice.Finder): no issue
// → found false; one → what Create would answer a resend of req; two or
// more → a permanent error naming them.
func (a *Adapter) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	if err := checkRequest(req); err != nil {
		return a.none(), false, taskservice.Permanent(err)
	}
	t, err := a.target(ctx)
	if err != nil {
		return a.none(), false, err
	}
	found, ignored, err := a.lookup(ctx, t, req.KeyScope(), req.IntentID)
	if err != nil || len(found) == 0 {
		res := a.none()
		res.Reason = notFor(ignored)
		return res, false, err
	}
	res, err := a.answer(req, found, ignored)
	return res, err == nil, err
}

// answer says what the issues found for req's key mean: found are the
// issues taken as its task, ignored those that claim it without proof,
// which the result's Reason names.
func (a *Adapter) answer(req taskservice.Request, found, ignored []Issue) (taskservice.Result, error) {
	if len(found) > 1 {
		ids := make([]string, len(found))
		for i, is := range found {
			ids[i] = "#" + strconv.Itoa(is.ID)
		}
		made := ""
		if a.markKey != nil {
			made = ", each proven to be made by this deployment"
		}
		return a.none(), taskservice.Permanent(fmt.Errorf("%w: intent %q in scope %q is carried by issues %s of project %q%s: the task was created more than once, and sending again changes nothing; delete all but one by hand",
			ErrDuplicates, req.IntentID, req.KeyScope(), strings.Join(ids, ", "), a.project, made))
	}
	is := found[0]
	res := taskservice.Result{Outcome: taskservice.Replayed, TaskID: TaskID(is.ID), StoreID: a.storeID}
	var why []string
	if is.RequestDigest != req.RequestDigest {
		res.Outcome = taskservice.Conflict
		why = append(why, fmt.Sprintf("issue #%d carries this key for request digest %s", is.ID, is.RequestDigest))
	}
	if note := notFor(ignored); note != "" {
		why = append(why, note)
	}
	res.Reason = strings.Join(why, "; ")
	return res, nil
}

// apiIssue is an issue as GET issues.json shows it.
type apiIssue struct {
	ID      int    `json:"id"`
	Subject string `json:"subject"`
	Author  author `json:"author"`
	Status  struct {
		IsClosed *bool `json:"is_closed"`
	} `json:"status"`
	ClosedOn     *string `json:"closed_on"`
	CustomFields []struct {
		ID    int             `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"custom_fields"`
}

// mark is the issue's value of field id ("" when it has none).
func (is apiIssue) mark(fieldID int) string {
	for _, f := range is.CustomFields {
		if f.ID == fieldID {
			var s string
			if json.Unmarshal(f.Value, &s) == nil {
				return s
			}
		}
	}
	return ""
}

func (is apiIssue) closed() bool {
	if is.Status.IsClosed != nil {
		return *is.Status.IsClosed
	}
	return is.ClosedOn != nil && *is.ClosedOn != ""
}

// pageSize is Redmine's largest page of issues.
const pageSize = 100

// marked lists the project's issues, open and closed, whose mark starts
// with prefix, page by page, reading every mark exactly and saying which
// are unproven (Issue.Unproven); keep says which to return.
func (a *Adapter) marked(ctx context.Context, t target, prefix, what string, keep func(Issue) bool) ([]Issue, int, error) {
	var out []Issue
	seen := map[int]bool{}
	for offset := 0; ; {
		var page struct {
			Issues     []apiIssue `json:"issues"`
			TotalCount int        `json:"total_count"`
		}
		q := url.Values{
			"cf_" + strconv.Itoa(t.fieldID): {"^" + prefix},
			"sort":                          {"id"},
			"limit":                         {strconv.Itoa(pageSize)},
			"offset":                        {strconv.Itoa(offset)},
		}
		if err := a.getJSON(ctx, a.issuesURL(t, q), what, &page); err != nil {
			return nil, 0, err
		}
		for _, is := range page.Issues {
			if seen[is.ID] {
				continue
			}
			seen[is.ID] = true
			m, ok := parseMark(is.mark(t.fieldID))
			if !ok {
				continue
			}
			i := Issue{ID: is.ID, Scope: m.scope, IntentID: m.intentID, RequestDigest: m.digest, Subject: is.Subject, Closed: is.closed(),
				Unproven: a.unproven(t, m, is.Author)}
			if keep(i) {
				out = append(out, i)
			}
		}
		offset += len(page.Issues)
		if len(page.Issues) == 0 || offset >= page.TotalCount {
			return out, page.TotalCount, nil
		}
	}
}

// lookup finds the issues that carry the key (scope, intentID): Redmine's
// "starts with" filter on the prefix of each version of the mark, then
// each mark read exactly. found are the issues taken as the key's task;
// ignored claim it without proof (Issue.Unproven).
func (a *Adapter) lookup(ctx context.Context, t target, scope, intentID string) (found, ignored []Issue, err error) {
	all, err := a.markedAll(ctx, t, func(version string) string { return markPrefix(version, scope, intentID) },
		fmt.Sprintf("looking up intent %q in scope %q", intentID, scope), func(is Issue) bool {
			return is.Scope == scope && is.IntentID == intentID
		})
	for _, is := range all {
		if is.Unproven == "" {
			found = append(found, is)
		} else {
			ignored = append(ignored, is)
		}
	}
	return found, ignored, err
}

// markedAll is marked for the prefix of every version of the mark, with
// the issues found ordered by id.
func (a *Adapter) markedAll(ctx context.Context, t target, prefix func(version string) string, what string, keep func(Issue) bool) ([]Issue, error) {
	var all []Issue
	for _, v := range []string{MarkVersion, TaggedMarkVersion} {
		found, _, err := a.marked(ctx, t, prefix(v), what, keep)
		if err != nil {
			return nil, err
		}
		all = append(all, found...)
	}
	slices.SortFunc(all, func(x, y Issue) int { return x.ID - y.ID })
	return all, nil
}

// Issues lists the project's issues that carry a mark, open and closed,
// ordered by id, and counts all of its issues.
func (a *Adapter) Issues(ctx context.Context) (Listing, error) {
	t, err := a.target(ctx)
	if err != nil {
		return Listing{}, err
	}
	found, err := a.markedAll(ctx, t, func(version string) string { return version + " " }, "listing the marked issues", func(Issue) bool { return true })
	if err != nil {
		return Listing{}, err
	}
	var all struct {
		TotalCount int `json:"total_count"`
	}
	if err := a.getJSON(ctx, a.issuesURL(t, url.Values{"limit": {"1"}}), "counting the project's issues", &all); err != nil {
		return Listing{}, err
	}
	return Listing{Issues: found, Total: all.TotalCount}, nil
}

// DeleteTask deletes the issue(s) carrying the key (scope, intentID), as its
// owner would. No issue: an error wrapping ErrNoTask (permanent).
func (a *Adapter) DeleteTask(ctx context.Context, scope, intentID string) error {
	if scope == "" {
		scope = taskservice.DefaultScope
	}
	if !taskservice.ValidScope(scope) || intentID == "" {
		return taskservice.Permanent(fmt.Errorf("redmine: deleting: bad key (%q, %q)", scope, intentID))
	}
	t, err := a.target(ctx)
	if err != nil {
		return err
	}
	found, _, err := a.lookup(ctx, t, scope, intentID)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return taskservice.Permanent(fmt.Errorf("redmine: deleting intent %q in scope %q: %w", intentID, scope, ErrNoTask))
	}
	for _, is := range found {
		target := a.endpoint("issues/"+strconv.Itoa(is.ID)+".json", nil)
		resp, body, err := a.exchange(ctx, http.MethodDelete, target, nil)
		if err != nil {
			return err
		}
		switch resp.StatusCode {
		case http.StatusOK, http.StatusNoContent, http.StatusNotFound: // 404: gone already
		default:
			return a.statusError(http.MethodDelete, target, fmt.Sprintf("deleting issue #%d", is.ID), resp, body)
		}
	}
	return nil
}

// Naive returns a service that creates a marked issue on every call, with
// no lookup and no lock: what a plain retry does to a service with no key.
// For the probe's naive-retry row and comparisons only; never served.
func (a *Adapter) Naive() taskservice.Service {
	return taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		issue, t, err := a.prepare(ctx, req)
		if err != nil {
			return a.none(), err
		}
		id, _, err := a.post(ctx, t, req, issue)
		if err != nil {
			return a.none(), err
		}
		return taskservice.Result{Outcome: taskservice.Created, TaskID: TaskID(id), StoreID: a.storeID}, nil
	})
}

// prepare checks req, builds its issue and finds the project and custom
// field to create it in: the steps before every create. A bad request is a
// permanent error.
func (a *Adapter) prepare(ctx context.Context, req taskservice.Request) (newIssueBody, target, error) {
	if err := checkRequest(req); err != nil {
		return newIssueBody{}, target{}, taskservice.Permanent(err)
	}
	issue, err := newIssue(req)
	if err != nil {
		return newIssueBody{}, target{}, taskservice.Permanent(err)
	}
	t, err := a.target(ctx)
	if err != nil {
		return newIssueBody{}, target{}, err
	}
	return issue, t, nil
}

// post creates the issue of req with its mark. ambiguous says that the
// issue may have been created though the answer says nothing of it (a
// transport failure, a 5xx).
func (a *Adapter) post(ctx context.Context, t target, req taskservice.Request, issue newIssueBody) (id int, ambiguous bool, err error) {
	issue.ProjectID = t.projectID
	mark := a.mark(req)
	issue.CustomFields = []customValue{{ID: t.fieldID, Value: mark}}
	target := a.endpoint("issues.json", nil)
	what := fmt.Sprintf("creating the issue of intent %q in scope %q", req.IntentID, req.KeyScope())
	resp, body, err := a.exchange(ctx, http.MethodPost, target, map[string]any{"issue": issue})
	if err != nil {
		return 0, true, err
	}
	if resp.StatusCode != http.StatusCreated {
		serr := a.statusError(http.MethodPost, target, what, resp, body)
		return 0, !taskservice.IsPermanent(serr), serr
	}
	var created struct {
		Issue apiIssue `json:"issue"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.Issue.ID == 0 {
		return 0, true, taskservice.Transient(fmt.Errorf("redmine: POST %s (%s): answered 201 without an issue id", target, what))
	}
	if got := created.Issue.mark(t.fieldID); got != mark {
		// Redmine drops a value for a field not enabled for the project or
		// the tracker: the issue exists, unmarked, and a retry would make
		// another.
		return created.Issue.ID, false, taskservice.Permanent(fmt.Errorf("%w: Redmine created issue #%d but did not keep its mark in field %q (#%d): the field is not enabled for project %q or its tracker; the issue is left as it is: %s",
			ErrNoField, created.Issue.ID, a.field, t.fieldID, a.project, a.howToMakeField()))
	}
	return created.Issue.ID, false, nil
}

// newIssueBody is the "issue" of POST issues.json.
type newIssueBody struct {
	ProjectID    int           `json:"project_id"`
	Subject      string        `json:"subject"`
	Description  string        `json:"description,omitempty"`
	StartDate    string        `json:"start_date,omitempty"`
	DueDate      string        `json:"due_date,omitempty"`
	CustomFields []customValue `json:"custom_fields"`
}

type customValue struct {
	ID    int    `json:"id"`
	Value string `json:"value"`
}

// newIssue is the issue of req, without its project and mark.
func newIssue(req taskservice.Request) (newIssueBody, error) {
	title := strings.TrimSpace(req.Task.Title)
	if title == "" {
		return newIssueBody{}, errors.New("redmine: the task's title is empty")
	}
	b := newIssueBody{Subject: subject(title), Description: description(req)}
	if one := strings.Join(strings.Fields(title), " "); b.Subject != one {
		b.Description = one + "\n\n" + b.Description // the title whole
	}
	if req.Task.DueAt != nil {
		d, err := dueDate(*req.Task.DueAt)
		if err != nil {
			return newIssueBody{}, err
		}
		b.DueDate = d
		// Redmine refuses a due date before the start date, which it sets
		// to the day of the create unless told otherwise: a due date up to
		// a day ahead of ours (the server's day may differ) starts that day.
		if d <= now().UTC().AddDate(0, 0, 1).Format(time.DateOnly) {
			b.StartDate = d
		}
	}
	return b, nil
}

// now is the clock of start dates; tests replace it.
var now = time.Now

// MaxSubjectRunes is the longest subject Redmine takes (its issues'
// subject column); a longer title is cut, whole in the description.
const MaxSubjectRunes = 255

// subject is title on one line, cut to MaxSubjectRunes with an ellipsis.
func subject(title string) string {
	s := strings.Join(strings.Fields(title), " ")
	r := []rune(s)
	if len(r) <= MaxSubjectRunes {
		return s
	}
	return strings.TrimSpace(string(r[:MaxSubjectRunes-1])) + "…"
}

// dueDate is the date part (YYYY-MM-DD) of an RFC 3339 date-time, as
// written (in its own offset), or an RFC 3339 full-date as it is.
func dueDate(s string) (string, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.Format(time.DateOnly), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Format(time.DateOnly), nil
	}
	return "", fmt.Errorf("redmine: due_at %q is neither an RFC 3339 date-time nor a date", s)
}

func jsonInto(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the answer is not the JSON expected: %w", err)
	}
	return nil
}

// ListTasks lists the project's issues that carry a key, open and closed,
// as a taskservice.Listing, with every issue of the project counted
// (taskservice.Lister).
func (a *Adapter) ListTasks(ctx context.Context) (taskservice.Listing, error) {
	l, err := a.Issues(ctx)
	if err != nil {
		return taskservice.Listing{}, fmt.Errorf("listing the project's issues: %w", err)
	}
	out := taskservice.Listing{Name: "Redmine project " + a.Project() + " at " + a.URL(), StoreID: a.StoreID(), Items: l.Total,
		NoCallLog: "Redmine keeps no call log"}
	for _, i := range l.Issues {
		out.Tasks = append(out.Tasks, taskservice.ListedTask{Scope: i.Scope, IntentID: i.IntentID, TaskID: TaskID(i.ID),
			RequestDigest: i.RequestDigest, Where: "issue #" + strconv.Itoa(i.ID), Title: i.Subject, Unproven: i.Unproven})
	}
	return out, nil
}
