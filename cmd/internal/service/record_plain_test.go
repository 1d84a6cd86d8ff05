package service

import (
	"errors"
	"flag"
	"testing"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// Plain status and verify send the reader's password or API key to the
// service the record names. Anyone who may write the record could point
// it at a machine of theirs, so a secret is never sent in clear to another
// host on the record's word alone: the URL must be on the command line.
func TestARecordedPlainHTTPURLOnAnotherHostGetsNoSecret(t *testing.T) {
	caldavRec := func(u, user string) topology.TaskService {
		return topology.TaskService{Kind: KindCalDAV, Destinations: map[string]string{"default": u}, CalDAVUser: user}
	}
	redmineRec := func(u string) topology.TaskService {
		return topology.TaskService{Kind: KindRedmine, RedmineURL: u, RedmineProject: "ops", RedmineField: "sendtwice key"}
	}
	for _, c := range []struct {
		name    string
		rec     topology.TaskService
		args    []string
		refused bool
	}{
		{"a CalDAV collection over http on another host, with a user, is refused", caldavRec("http://dav.example.org/alice/tasks/", "alice"), nil, true},
		{"a CalDAV collection over http on another host is taken when the command line names it", caldavRec("http://dav.example.org/alice/tasks/", "alice"),
			[]string{"--caldav-url", "http://dav.example.org/alice/tasks/"}, false},
		{"a CalDAV collection over http on another host without a user is taken (no password is sent)", caldavRec("http://dav.example.org/alice/tasks/", ""), nil, false},
		{"a CalDAV collection over https is taken", caldavRec("https://dav.example.org/alice/tasks/", "alice"), nil, false},
		{"a CalDAV collection over http on loopback is taken", caldavRec("http://127.0.0.1:5232/alice/tasks/", "alice"), nil, false},
		{"a CalDAV collection over http on localhost is taken", caldavRec("http://localhost:5232/alice/tasks/", "alice"), nil, false},
		{"Redmine over http on another host is refused", redmineRec("http://redmine.example.org/"), nil, true},
		{"Redmine over http on another host is taken when the command line names it", redmineRec("http://redmine.example.org/"),
			[]string{"--redmine-url", "http://redmine.example.org/"}, false},
		{"Redmine over https is taken", redmineRec("https://redmine.example.org/"), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("verify", flag.ContinueOnError)
			f := FlagsVar(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			_, err := f.settle(c.rec)
			if got := errors.Is(err, ErrRecordedPlainHTTP); got != c.refused {
				t.Fatalf("settle: %v; refused %v, want %v", err, got, c.refused)
			}
			if !c.refused && err != nil {
				t.Fatalf("settle: %v", err)
			}
		})
	}
}
