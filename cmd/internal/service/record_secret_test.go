package service

import (
	"flag"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/topology"
)

// Plain status and verify take what their flags leave out from the
// executors' record. Anyone who may write the record could point it at a
// machine of theirs, so a password or an API key goes only to a URL given
// on the command line: with a secret (a flag or the environment) and the
// record's URL, the command is told which flag to add; without one, the
// record's URL is read as it is.
func TestAPasswordOrAPIKeyGoesOnlyToAURLGivenOnTheCommandLine(t *testing.T) {
	caldavRec := func(user string) topology.TaskService {
		return topology.TaskService{Kind: KindCalDAV, Destinations: map[string]string{"default": "https://dav.example.org/alice/tasks/"}, CalDAVUser: user}
	}
	redmineRec := topology.TaskService{Kind: KindRedmine, RedmineURL: "https://redmine.example.org/", RedmineProject: "ops", RedmineField: "sendtwice key"}
	for _, c := range []struct {
		name string
		rec  topology.TaskService
		args []string
		env  map[string]string
		// add is what the hint tells to add; "" when the secret may go.
		add string
	}{
		{"a password in the environment is not sent to the record's collection", caldavRec("alice"), nil,
			map[string]string{CalDAVPasswordEnv: "pw"}, "add --caldav-url URL, the collection you mean"},
		{"a password file is not sent to the record's collection", caldavRec("alice"), []string{"--caldav-password-file", "pw.txt"},
			nil, "add --caldav-url URL, the collection you mean"},
		{"a password with --caldav-user is not sent to the record's collection that names no user", caldavRec(""), []string{"--caldav-user", "alice"},
			map[string]string{CalDAVPasswordEnv: "pw"}, "add --caldav-url URL, the collection you mean"},
		{"a recorded user without a password asks for the URL and the password", caldavRec("alice"), nil,
			nil, "add --caldav-url URL and --caldav-password-file FILE"},
		{"the record's collection without a user or a password is read as it is", caldavRec(""), nil, nil, ""},
		{"a password goes to the collection the command line names, the record's", caldavRec("alice"),
			[]string{"--caldav-url", "https://dav.example.org/alice/tasks/", "--caldav-password-file", "pw.txt"}, nil, ""},
		{"an API key in the environment is not sent to the record's Redmine", redmineRec, nil,
			map[string]string{RedmineAPIKeyEnv: "key"}, "add --redmine-url URL, the Redmine you mean"},
		{"an API key file is not sent to the record's Redmine", redmineRec, []string{"--redmine-api-key-file", "key.txt"},
			nil, "add --redmine-url URL, the Redmine you mean"},
		{"no API key asks for the URL and the key", redmineRec, nil, nil, "add --redmine-url URL and --redmine-api-key-file FILE"},
		{"an API key goes to the Redmine the command line names, the project taken from the record", redmineRec,
			[]string{"--redmine-url", "https://redmine.example.org", "--redmine-api-key-file", "key.txt"}, nil, ""},
		{"a missing API key for the Redmine the command line names asks for the key alone", redmineRec,
			[]string{"--redmine-url", "https://redmine.example.org/"}, nil, "its API key is never recorded: add --redmine-api-key-file FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("verify", flag.ContinueOnError)
			f := FlagsVar(fs)
			f.getenv = func(name string) string { return c.env[name] }
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if _, err := f.settle(c.rec); err != nil {
				t.Fatalf("settle: %v", err)
			}
			hint := f.SecretHint("verify", "")
			if c.add == "" && hint != "" || !strings.Contains(hint, c.add) {
				t.Errorf("the hint %q, want one saying %q", hint, c.add)
			}
		})
	}
}
