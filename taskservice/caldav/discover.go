package caldav

// This file finds an account's calendars the standard way (RFC 6764's
// /.well-known/caldav, RFC 5397's current-user-principal, RFC 4791's
// calendar-home-set) and checks that a collection is a calendar that
// accepts tasks, before anything is created in it.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sendtwice/sendtwice/internal/redact"
	"github.com/sendtwice/sendtwice/taskservice"
)

// ErrNotTaskCalendar is wrapped by Check when the collection URL is not a
// calendar collection whose supported components include VTODO; the error
// says what the URL is instead.
var ErrNotTaskCalendar = errors.New("caldav: not a calendar collection that accepts tasks")

// ErrNoCalendar is wrapped by FindCalendar when no calendar of the account
// that accepts tasks has the display name asked for; the error lists those
// that do.
var ErrNoCalendar = errors.New("caldav: no calendar with that name accepts tasks")

// ErrLoginRefused is wrapped by Check, Discover and FindCalendar when the
// server refuses the login (401) or the user's access (403); the error
// quotes the server's message.
var ErrLoginRefused = errors.New("caldav: the server refused the login")

// Calendar is one calendar collection of an account.
type Calendar struct {
	// URL is the collection's absolute URL, ending in "/".
	URL         string
	DisplayName string
	// Components are the component names the calendar supports (VTODO,
	// VEVENT, ...); all of them when the server does not say.
	Components []string
}

// AcceptsTasks reports whether the calendar supports VTODO.
func (c Calendar) AcceptsTasks() bool { return slices.Contains(c.Components, "VTODO") }

// allComponents are the components of a calendar that has no
// supported-calendar-component-set: it accepts them all (RFC 4791 §5.2.3).
var allComponents = []string{"VEVENT", "VTODO", "VJOURNAL"}

// maxRedirects bounds the redirects followed from /.well-known/caldav.
const maxRedirects = 5

// Discover lists the account's calendars. cfg.CollectionURL is the
// server's URL, or any URL on it (a principal, a calendar home); the
// login and the HTTP client are cfg's.
//
// It asks the URL for the current user's principal (RFC 5397), and when
// the URL cannot say, /.well-known/caldav (RFC 6764; its redirects are
// followed on the same server only) and then the server's root; then the
// principal's calendar-home-set, and each home's calendars with their
// display names and supported components, ordered by display name and
// URL. A login refused is an error wrapping ErrLoginRefused.
func Discover(ctx context.Context, cfg Config) ([]Calendar, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return a.discover(ctx)
}

func (a *Adapter) discover(ctx context.Context) ([]Calendar, error) {
	principal, err := a.findPrincipal(ctx)
	if err != nil {
		return nil, err
	}
	homes, err := a.homeSet(ctx, principal)
	if err != nil {
		return nil, err
	}
	var cals []Calendar
	seen := map[string]bool{}
	for _, home := range homes {
		in, err := a.calendarsIn(ctx, home)
		if err != nil {
			return nil, err
		}
		for _, c := range in {
			if !seen[c.URL] {
				seen[c.URL] = true
				cals = append(cals, c)
			}
		}
	}
	sort.Slice(cals, func(i, j int) bool {
		if cals[i].DisplayName != cals[j].DisplayName {
			return cals[i].DisplayName < cals[j].DisplayName
		}
		return cals[i].URL < cals[j].URL
	})
	return cals, nil
}

// FindCalendar discovers the account's calendars (as Discover) and
// returns the one that accepts tasks and has displayName. None: an error
// wrapping ErrNoCalendar that lists the calendars that accept tasks (and
// names a calendar of that name that does not). More than one: an error
// naming their URLs.
func FindCalendar(ctx context.Context, cfg Config, displayName string) (Calendar, error) {
	cals, err := Discover(ctx, cfg)
	if err != nil {
		return Calendar{}, err
	}
	var match, tasks []Calendar
	var other []string
	for _, c := range cals {
		switch {
		case c.AcceptsTasks() && c.DisplayName == displayName:
			match = append(match, c)
		case c.AcceptsTasks():
			tasks = append(tasks, c)
		case c.DisplayName == displayName:
			other = append(other, fmt.Sprintf("%s (%s) accepts only %s", c.URL, quoteName(c.DisplayName), strings.Join(c.Components, ", ")))
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		msg := fmt.Sprintf("%q; the account's calendars that accept tasks: %s", displayName, listCalendars(tasks))
		if len(other) > 0 {
			msg += "; not for tasks: " + strings.Join(other, "; ")
		}
		return Calendar{}, taskservice.Permanent(fmt.Errorf("%w: %s", ErrNoCalendar, msg))
	}
	urls := make([]string, len(match))
	for i, c := range match {
		urls[i] = c.URL
	}
	return Calendar{}, taskservice.Permanent(fmt.Errorf("caldav: %d calendars that accept tasks are named %q: %s; give the one meant by its URL, or rename one",
		len(match), displayName, strings.Join(urls, " and ")))
}

// listCalendars says which calendars a list holds, for an error.
func listCalendars(cals []Calendar) string {
	if len(cals) == 0 {
		return "none"
	}
	s := make([]string, len(cals))
	for i, c := range cals {
		s[i] = quoteName(c.DisplayName) + " " + c.URL
	}
	return strings.Join(s, ", ")
}

func quoteName(n string) string {
	if n == "" {
		return "(no display name)"
	}
	return strconv.Quote(n)
}

// Check makes sure, creating nothing, that the collection URL is a
// calendar collection that accepts tasks and that the login is accepted:
// one PROPFIND (depth 0) of the collection, which must be a calendar
// (resourcetype calendar) whose supported components include VTODO (a
// calendar that does not say accepts all).
//
// An error wrapping ErrNotTaskCalendar says what the URL is instead: an
// account's principal, a calendar home, a plain collection, a calendar
// for other components, a resource that is not a collection, nothing (404),
// or a redirect (its Location shown, not followed); when the account's
// calendars can be discovered from the URL, it lists those that accept
// tasks. A login refused (401, 403) wraps ErrLoginRefused and quotes the
// server. These are permanent; a 5xx, 408, 429 or a lost connection is
// transient.
func (a *Adapter) Check(ctx context.Context) error {
	rs, ans, err := a.propfind(ctx, a.collection, "0", checkProps)
	if err == nil && ans != nil && ans.code == http.StatusUnauthorized && a.user == "" {
		// A server without logins (Radicale's auth none) refuses an
		// anonymous request for a principal's properties: ask for the
		// collection's own alone.
		rs, ans, err = a.propfind(ctx, a.collection, "0", calendarProps)
	}
	if err != nil {
		return err
	}
	if ans != nil {
		return a.checkAnswer(ctx, ans)
	}
	r := rs.self(a.collection)
	if r == nil {
		return taskservice.Permanent(fmt.Errorf("caldav: PROPFIND %s: the answer does not describe the collection", a.normalized))
	}
	if r.status == http.StatusNotFound || r.status == http.StatusGone {
		return a.notTasks(ctx, fmt.Sprintf("does not exist (the server answered %d %s)", r.status, http.StatusText(r.status)))
	}
	switch {
	case r.calendar:
		comps := r.components()
		if slices.Contains(comps, "VTODO") {
			return nil
		}
		return a.notTasks(ctx, "is a calendar for "+strings.Join(comps, ", ")+" only, not for tasks (VTODO)")
	case r.principal:
		return a.notTasks(ctx, "is an account's principal, not a calendar")
	case r.collection:
		if homes, err := a.homeSet(ctx, r.userPrincipal); err == nil && r.userPrincipal != "" && slices.Contains(homes, a.collection.Path) {
			return a.notTasks(ctx, "is the account's calendar home (the collection of its calendars), not a calendar")
		}
		if cals, err := a.calendarsIn(ctx, a.collection.Path); err == nil && len(cals) > 0 {
			return a.notTasks(ctx, "is a collection of calendars (a calendar home), not a calendar")
		}
		if a.collection.Path == "/" {
			return a.notTasks(ctx, "is the server's root, not a calendar")
		}
		return a.notTasks(ctx, "is a plain collection, not a calendar")
	}
	return a.notTasks(ctx, "is not a collection")
}

// notTasks is Check's error for a URL that is not a calendar for tasks:
// what it is, and the account's calendars that accept tasks when they can
// be discovered from it.
func (a *Adapter) notTasks(ctx context.Context, what string) error {
	msg := fmt.Sprintf("%s %s", a.normalized, what)
	if cals, err := a.discover(ctx); err == nil {
		var tasks []Calendar
		for _, c := range cals {
			if c.AcceptsTasks() {
				tasks = append(tasks, c)
			}
		}
		msg += "; the account's calendars that accept tasks: " + listCalendars(tasks)
	}
	return taskservice.Permanent(fmt.Errorf("%w: %s", ErrNotTaskCalendar, msg))
}

// checkAnswer is Check's error for an answer other than 207 Multi-Status.
func (a *Adapter) checkAnswer(ctx context.Context, ans *answer) error {
	switch code := ans.code; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return a.loginRefused("PROPFIND", a.normalized, ans)
	case code == http.StatusNotFound || code == http.StatusGone:
		return a.notTasks(ctx, "does not exist (the server answered "+ans.status+")")
	case code >= 300 && code < 400:
		return taskservice.Permanent(fmt.Errorf("%w: %s answers %s with a redirect to %q, which is not followed: configure the collection's own URL",
			ErrNotTaskCalendar, a.normalized, ans.status, redact.URL(ans.location)))
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		return taskservice.Transient(fmt.Errorf("caldav: PROPFIND %s: the server answered %s%s", a.normalized, ans.status, ans.quoted()))
	}
	return taskservice.Permanent(fmt.Errorf("caldav: PROPFIND %s: the server answered %s%s", a.normalized, ans.status, ans.quoted()))
}

// loginRefused is the permanent error of a 401 or 403.
func (a *Adapter) loginRefused(method, target string, ans *answer) error {
	why := fmt.Sprintf("the credentials of user %q were refused", a.user)
	if a.user == "" {
		why = "no credentials were given (set a user and a password)"
	}
	if ans.code == http.StatusForbidden {
		why = fmt.Sprintf("user %q may not use %s", a.user, target)
	}
	return taskservice.Permanent(fmt.Errorf("%w: %s %s: the server answered %s%s: %s", ErrLoginRefused, method, target, ans.status, ans.quoted(), why))
}

// findPrincipal returns the path of the current user's principal, asked
// of the configured URL, then of /.well-known/caldav (following its
// redirects on this server), then of the server's root.
func (a *Adapter) findPrincipal(ctx context.Context) (string, error) {
	var tried []string
	var forbidden error
	ask := func(u *url.URL) (string, error) {
		tried = append(tried, u.Path)
		rs, ans, err := a.propfind(ctx, u, "0", principalProps)
		if err != nil {
			return "", err
		}
		if ans != nil {
			switch {
			case ans.code == http.StatusUnauthorized:
				return "", a.loginRefused("PROPFIND", u.String(), ans)
			case ans.code == http.StatusForbidden && forbidden == nil:
				// A place the user may not read (Radicale: any path
				// outside their own); the next place may say.
				forbidden = a.loginRefused("PROPFIND", u.String(), ans)
			}
			if ans.code >= 500 || ans.code == http.StatusRequestTimeout || ans.code == http.StatusTooManyRequests {
				return "", taskservice.Transient(fmt.Errorf("caldav: PROPFIND %s: the server answered %s", u, ans.status))
			}
			return "", nil
		}
		if r := rs.self(u); r != nil {
			return r.userPrincipal, nil
		}
		return "", nil
	}
	if p, err := ask(a.collection); p != "" || err != nil {
		return p, err
	}
	if u, err := a.wellKnown(ctx); err != nil {
		return "", err
	} else if u != nil && !slices.Contains(tried, u.Path) {
		if p, err := ask(u); p != "" || err != nil {
			return p, err
		}
	}
	if root := a.at("/"); !slices.Contains(tried, "/") {
		if p, err := ask(root); p != "" || err != nil {
			return p, err
		}
	}
	if forbidden != nil {
		return "", forbidden
	}
	return "", taskservice.Permanent(fmt.Errorf("caldav: no current-user-principal (RFC 5397) at %s: asked %s; is this a CalDAV server?",
		a.normalized, strings.Join(tried, ", ")))
}

// wellKnown follows /.well-known/caldav's redirects on this server and
// returns where they end, or nil when the server has none.
func (a *Adapter) wellKnown(ctx context.Context) (*url.URL, error) {
	u := &url.URL{Scheme: a.collection.Scheme, Host: a.collection.Host, Path: "/.well-known/caldav"}
	for range maxRedirects {
		_, ans, err := a.propfind(ctx, u, "0", principalProps)
		if err != nil {
			return nil, err
		}
		if ans == nil {
			return u, nil
		}
		if ans.code < 300 || ans.code >= 400 || ans.location == "" {
			return nil, nil
		}
		next, err := u.Parse(ans.location)
		if err != nil {
			return nil, nil
		}
		if !strings.EqualFold(next.Scheme, a.collection.Scheme) || !strings.EqualFold(next.Host, a.collection.Host) {
			return nil, taskservice.Permanent(fmt.Errorf("caldav: %s redirects to another server, %q, which is not followed (the login stays with %s://%s): give that server's URL",
				u, redact.URL(ans.location), a.collection.Scheme, a.collection.Host))
		}
		u = a.at(next.Path)
	}
	return nil, nil
}

// homeSet returns the calendar homes of a principal (its
// calendar-home-set); the principal itself when it names none.
func (a *Adapter) homeSet(ctx context.Context, principal string) ([]string, error) {
	if principal == "" {
		return nil, errors.New("caldav: no principal")
	}
	u := a.at(principal)
	rs, err := a.propfindMultiStatus(ctx, u, "0", homeProps)
	if err != nil {
		return nil, err
	}
	if r := rs.self(u); r != nil && len(r.homes) > 0 {
		return r.homes, nil
	}
	return []string{u.Path}, nil
}

// calendarsIn lists the calendars directly in the collection at p.
func (a *Adapter) calendarsIn(ctx context.Context, p string) ([]Calendar, error) {
	u := a.at(p)
	rs, err := a.propfindMultiStatus(ctx, u, "1", calendarProps)
	if err != nil {
		return nil, err
	}
	var cals []Calendar
	for _, r := range rs {
		if !r.calendar || r.path == u.Path {
			continue
		}
		cals = append(cals, Calendar{URL: a.at(r.path).String(), DisplayName: r.displayName, Components: r.components()})
	}
	return cals, nil
}

// at is the URL of path p on the collection's server, ending in "/".
func (a *Adapter) at(p string) *url.URL {
	c := path.Clean("/" + p)
	if c != "/" {
		c += "/"
	}
	return &url.URL{Scheme: a.collection.Scheme, Host: a.collection.Host, Path: c}
}
