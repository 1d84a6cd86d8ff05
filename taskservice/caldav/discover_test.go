package caldav_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// account starts a server of kind k with a login where the server has one
// (Radicale), and makes beside the rig's calendar one for tasks named
// "Work" and one for events only named "Events" (Xandikos keeps no
// component set: its "Events" accepts everything).
func account(t *testing.T, k davtest.Kind) (*davtest.Server, caldav.Config) {
	t.Helper()
	var opts davtest.Options
	cfg := caldav.Config{}
	if k == davtest.Radicale {
		opts = davtest.Options{User: "alice", Password: "s3cret"}
		cfg.Username, cfg.Password = "alice", "s3cret"
	}
	srv := davtest.Start(t, k, opts)
	srv.MakeCalendar(srv.HomePath+"work/", "Work", "VTODO")
	srv.MakeCalendar(srv.HomePath+"events/", "Events", "VEVENT")
	return srv, cfg
}

func TestDiscoverFindsTheAccountsCalendarsFromAnyURLOnTheServer(t *testing.T) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			srv, cfg := account(t, k)
			starts := []struct{ name, url string }{
				{"from the server's root", srv.BaseURL + "/"},
				{"from the server's URL without a path", srv.BaseURL},
				{"from the account's principal", srv.PrincipalURL},
				{"from a calendar", srv.CollectionURL},
				{"from a URL that does not exist (through /.well-known/caldav)", srv.BaseURL + "/no/such/place/"},
			}
			for _, st := range starts {
				t.Run(st.name, func(t *testing.T) {
					c := cfg
					c.CollectionURL = st.url
					cals, err := caldav.Discover(context.Background(), c)
					if err != nil {
						t.Fatalf("Discover: %v", err)
					}
					byURL := map[string]caldav.Calendar{}
					for _, cal := range cals {
						byURL[cal.URL] = cal
					}
					work, ok := byURL[srv.BaseURL+srv.HomePath+"work/"]
					if !ok || work.DisplayName != "Work" || !work.AcceptsTasks() {
						t.Errorf("the calendar Work: %+v (found %v) in %+v; want it, named, accepting tasks", work, ok, cals)
					}
					if _, ok := byURL[srv.CollectionURL]; !ok {
						t.Errorf("the rig's calendar %s is not among %+v", srv.CollectionURL, cals)
					}
					events, ok := byURL[srv.BaseURL+srv.HomePath+"events/"]
					if !ok || events.DisplayName != "Events" {
						t.Errorf("the calendar Events: %+v (found %v)", events, ok)
					}
					if k == davtest.Radicale && (events.AcceptsTasks() || !slices.Equal(events.Components, []string{"VEVENT"})) {
						t.Errorf("the calendar Events has components %v; want VEVENT only", events.Components)
					}
				})
			}
		})
	}
}

func TestFindCalendarByDisplayName(t *testing.T) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			srv, cfg := account(t, k)
			srv.MakeCalendar(srv.HomePath+"twin-a/", "Twin", "VTODO")
			srv.MakeCalendar(srv.HomePath+"twin-b/", "Twin", "VTODO")
			cfg.CollectionURL = srv.BaseURL
			ctx := context.Background()

			t.Run("a calendar that accepts tasks is found by its name", func(t *testing.T) {
				cal, err := caldav.FindCalendar(ctx, cfg, "Work")
				if err != nil || cal.URL != srv.BaseURL+srv.HomePath+"work/" {
					t.Fatalf("FindCalendar(Work) = %+v, %v", cal, err)
				}
				// The URL found is one the adapter accepts and checks.
				if err := adapter(t, cal.URL, cfg).Check(ctx); err != nil {
					t.Errorf("Check of the calendar found: %v", err)
				}
			})
			t.Run("a name no calendar has is refused, listing those that accept tasks", func(t *testing.T) {
				_, err := caldav.FindCalendar(ctx, cfg, "Nope")
				t.Logf("error: %v", err)
				if !errors.Is(err, caldav.ErrNoCalendar) || !strings.Contains(err.Error(), `"Work" `+srv.BaseURL+srv.HomePath+"work/") {
					t.Errorf("FindCalendar(Nope): %v; want ErrNoCalendar listing Work", err)
				}
			})
			t.Run("two calendars with the name are refused, naming both", func(t *testing.T) {
				_, err := caldav.FindCalendar(ctx, cfg, "Twin")
				t.Logf("error: %v", err)
				if err == nil || !strings.Contains(err.Error(), srv.HomePath+"twin-a/") || !strings.Contains(err.Error(), srv.HomePath+"twin-b/") {
					t.Errorf("FindCalendar(Twin): %v; want an error naming both URLs", err)
				}
			})
			if k == davtest.Radicale {
				t.Run("a calendar for events only is not found, and the error says why", func(t *testing.T) {
					_, err := caldav.FindCalendar(ctx, cfg, "Events")
					t.Logf("error: %v", err)
					if !errors.Is(err, caldav.ErrNoCalendar) || !strings.Contains(err.Error(), "accepts only VEVENT") {
						t.Errorf("FindCalendar(Events): %v; want ErrNoCalendar saying it accepts only VEVENT", err)
					}
				})
				t.Run("a refused login is said so", func(t *testing.T) {
					bad := cfg
					bad.Password = "wrong"
					_, err := caldav.FindCalendar(ctx, bad, "Work")
					t.Logf("error: %v", err)
					if !errors.Is(err, caldav.ErrLoginRefused) || !taskservice.IsPermanent(err) || strings.Contains(err.Error(), "wrong") {
						t.Errorf("FindCalendar with a wrong password: %v; want a permanent ErrLoginRefused without the password", err)
					}
				})
			}
		})
	}
}

// checkCase is one URL given to Check and what its error must say.
type checkCase struct {
	name string
	url  string
	cfg  func(*caldav.Config)
	is   error    // nil: Check passes
	says []string // parts of the error's text
}

func TestCheckSaysWhatAURLIsWhenItIsNotACalendarForTasks(t *testing.T) {
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			srv, cfg := account(t, k)
			listed := `the account's calendars that accept tasks: `
			work := `"Work" ` + srv.BaseURL + srv.HomePath + "work/"
			cases := []checkCase{
				{name: "the rig's calendar passes", url: srv.CollectionURL},
				{name: "a calendar made for tasks only passes", url: srv.BaseURL + srv.HomePath + "work/"},
				{name: "the account's principal is refused as a principal, listing the calendars", url: srv.PrincipalURL,
					is: caldav.ErrNotTaskCalendar, says: []string{"is an account's principal, not a calendar", listed, work}},
				{name: "a URL where nothing is is refused as missing", url: srv.BaseURL + srv.HomePath + "nothing/",
					is: caldav.ErrNotTaskCalendar, says: []string{"does not exist", "404", listed, work}},
			}
			switch k {
			case davtest.Radicale:
				cases = append(cases,
					checkCase{name: "a calendar for events only is refused, saying so", url: srv.BaseURL + srv.HomePath + "events/",
						is: caldav.ErrNotTaskCalendar, says: []string{"is a calendar for VEVENT only, not for tasks (VTODO)", work}},
					checkCase{name: "the server's root is refused as the root", url: srv.BaseURL + "/",
						is: caldav.ErrNotTaskCalendar, says: []string{"is the server's root, not a calendar", work}},
					checkCase{name: "a wrong password is refused as a login, quoting the server", url: srv.CollectionURL,
						cfg: func(c *caldav.Config) { c.Password = "wrong" },
						is:  caldav.ErrLoginRefused, says: []string{"401 Unauthorized", "Access to the requested resource forbidden.", `the credentials of user "alice" were refused`}},
					checkCase{name: "no login at all is refused as a login", url: srv.CollectionURL,
						cfg: func(c *caldav.Config) { c.Username, c.Password = "", "" },
						is:  caldav.ErrLoginRefused, says: []string{"401 Unauthorized", "no credentials were given"}},
					checkCase{name: "another user's calendar is refused as forbidden", url: srv.BaseURL + "/bob/tasks/",
						is: caldav.ErrLoginRefused, says: []string{"403 Forbidden", `user "alice" may not use`}},
				)
			case davtest.Xandikos:
				srv.MakeCollection(srv.HomePath + "plain/")
				cases = append(cases,
					checkCase{name: "the calendar home is refused as the home, listing the calendars", url: srv.BaseURL + srv.HomePath,
						is: caldav.ErrNotTaskCalendar, says: []string{"is the account's calendar home (the collection of its calendars), not a calendar", work}},
					checkCase{name: "a plain collection is refused as one", url: srv.BaseURL + srv.HomePath + "plain/",
						is: caldav.ErrNotTaskCalendar, says: []string{"is a plain collection, not a calendar", work}},
				)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					cc := cfg
					if c.cfg != nil {
						c.cfg(&cc)
					}
					err := adapter(t, c.url, cc).Check(context.Background())
					assertCheck(t, err, c)
				})
			}
		})
	}
}

func assertCheck(t *testing.T, err error, c checkCase) {
	t.Helper()
	if c.is == nil {
		if err != nil {
			t.Fatalf("Check: %v; want it to pass", err)
		}
		return
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, c.is) || !taskservice.IsPermanent(err) {
		t.Fatalf("Check: %v; want a permanent error wrapping %q", err, c.is)
	}
	for _, s := range c.says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q", s)
		}
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") && !strings.Contains(c.name, "wrong") {
		t.Errorf("the error shows a password")
	}
}

// Neither server redirects a collection, nor fails with a 5xx on demand:
// an HTTP server stands in for those answers.
func TestCheckShowsARedirectsLocationAndRetriesAServerError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved/":
			w.Header().Set("Location", "https://carol:hunter2@dav.example.org/carol/tasks/?token=abc")
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	err := adapter(t, srv.URL+"/moved/", caldav.Config{}).Check(context.Background())
	assertCheck(t, err, checkCase{name: "a redirect", is: caldav.ErrNotTaskCalendar,
		says: []string{"301 Moved Permanently", "redirect to", "dav.example.org/carol/tasks/", "not followed"}})
	for _, secret := range []string{"hunter2", "token=abc"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows %q of the redirect's target: %v", secret, err)
		}
	}

	err = adapter(t, srv.URL+"/busy/", caldav.Config{}).Check(context.Background())
	t.Logf("error: %v", err)
	if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) || !strings.Contains(err.Error(), "503") {
		t.Errorf("Check against a 503: %v; want a transient error naming the status", err)
	}
}

// Both servers answer current-user-principal at their root, so discovery
// never needs /.well-known/caldav there. A proxy in front of Xandikos
// hides the root (404) and redirects /.well-known/caldav to the principal,
// as a server mounted below its root does; a second one redirects it to
// another server, which discovery must not follow with the login.
func TestDiscoverFollowsWellKnownOnTheSameServerOnly(t *testing.T) {
	srv := davtest.Start(t, davtest.Xandikos, davtest.Options{})
	target, err := url.Parse(srv.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	front := func(wellKnown string) *httptest.Server {
		proxy := httputil.NewSingleHostReverseProxy(target)
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/", "/no/such/place/":
				http.NotFound(w, r)
			case "/.well-known/caldav":
				http.Redirect(w, r, wellKnown, http.StatusMovedPermanently)
			default:
				proxy.ServeHTTP(w, r)
			}
		}))
	}
	same := front("/user/")
	defer same.Close()
	cals, err := caldav.Discover(context.Background(), caldav.Config{CollectionURL: same.URL + "/no/such/place/"})
	if err != nil || len(cals) != 1 || cals[0].URL != same.URL+srv.CollectionPath {
		t.Errorf("Discover through /.well-known/caldav: %+v, %v; want the rig's calendar", cals, err)
	}

	away := front(other.URL + "/user/")
	defer away.Close()
	_, err = caldav.Discover(context.Background(), caldav.Config{CollectionURL: away.URL + "/no/such/place/", Username: "u", Password: "s3cret"})
	t.Logf("error: %v", err)
	if err == nil || !strings.Contains(err.Error(), "another server") || elsewhere.Load() != 0 {
		t.Errorf("Discover with a well-known redirect to another server: %v (the other server got %d requests); want a refusal naming it", err, elsewhere.Load())
	}
}
