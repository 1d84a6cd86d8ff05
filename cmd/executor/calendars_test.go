package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// executor calendars against a real Radicale with a login: from the
// server's URL alone it finds the account's calendars and prints those that
// accept tasks, and with --all the others, marked.
func TestCalendarsListsTheAccountsCalendarsThatAcceptTasks(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: "alice", Password: "s3cret"})
	srv.MakeCalendar(srv.HomePath+"work/", "Work", "VTODO")
	srv.MakeCalendar(srv.HomePath+"events/", "Events", "VEVENT")
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := []string{"calendars", "--caldav-url", srv.BaseURL, "--caldav-user", "alice", "--caldav-password-file", pw}
	calendars := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(append([]string{}, login...), args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	work := srv.BaseURL + srv.HomePath + "work/"
	events := srv.BaseURL + srv.HomePath + "events/"

	t.Run("the calendars that accept tasks are printed with their names, URLs and components", func(t *testing.T) {
		out, errOut, err := calendars(t)
		if err != nil {
			t.Fatalf("calendars: %v\n%s", err, errOut)
		}
		t.Logf("output:\n%s", out)
		if !lineWith(out, "Work", work, "VTODO") || !strings.Contains(out, srv.CollectionURL) {
			t.Errorf("the output does not list Work (%s) and the rig's calendar:\n%s", work, out)
		}
		if strings.Contains(out, events) {
			t.Errorf("the output lists the events-only calendar without --all:\n%s", out)
		}
	})
	t.Run("with --all the others follow, marked", func(t *testing.T) {
		out, _, err := calendars(t, "--all")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("output:\n%s", out)
		if !lineWith(out, "Events", events, "VEVENT", "does not accept tasks") || lineWith(out, "Work", "does not accept tasks") {
			t.Errorf("the output does not mark Events alone:\n%s", out)
		}
	})
	t.Run("--json gives each calendar and whether it accepts tasks", func(t *testing.T) {
		out, _, err := calendars(t, "--all", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r service.CalendarsReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		got := map[string]service.CalendarEntry{}
		for _, c := range r.Calendars {
			got[c.URL] = c
		}
		if c := got[work]; c.DisplayName != "Work" || !c.AcceptsTasks {
			t.Errorf("Work: %+v", c)
		}
		if c := got[events]; c.DisplayName != "Events" || c.AcceptsTasks || strings.Join(c.Components, ",") != "VEVENT" {
			t.Errorf("Events: %+v", c)
		}
	})
	t.Run("a wrong password is refused with the server's answer, and not shown", func(t *testing.T) {
		var out, errOut bytes.Buffer
		t.Setenv(service.CalDAVPasswordEnv, "a-wrong-one")
		err := run(context.Background(), []string{"calendars", "--caldav-url", srv.PrincipalURL, "--caldav-user", "alice"}, &out, &errOut)
		if !errors.Is(err, caldav.ErrLoginRefused) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error()+out.String()+errOut.String(), "a-wrong-one") {
			t.Errorf("calendars with a wrong password: %v; want the login refused (401), the password not shown", err)
		}
	})
	t.Run("no URL is a usage error", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"calendars"}, &out, &errOut)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "--caldav-url") {
			t.Errorf("calendars without --caldav-url: %v (exit %d); want a usage error naming the flag", err, exitCode(err))
		}
	})
}

// A server with a self-signed certificate is reached with --caldav-ca-file,
// and refused without it.
func TestCalendarsTrustsTheCAFileGiven(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{User: "alice", Password: "s3cret", TLS: true})
	t.Setenv(service.CalDAVPasswordEnv, "s3cret")
	args := []string{"calendars", "--caldav-url", srv.BaseURL, "--caldav-user", "alice"}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append(args, "--caldav-ca-file", srv.CAFile), &out, &errOut); err != nil || !strings.Contains(out.String(), srv.CollectionURL) {
		t.Fatalf("with the CA file: %v; output:\n%s", err, out.String())
	}
	out.Reset()
	err := run(context.Background(), args, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA file: %v; want a certificate error", err)
	}
}

// lineWith reports whether one line of out holds every part.
func lineWith(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
