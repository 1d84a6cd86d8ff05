package service

import (
	"flag"
	"strings"
	"testing"
)

// A record leaves a URL's user and password out: it never holds a secret.
func TestTheRecordHoldsNoSecretOfAURL(t *testing.T) {
	const password = "s3cret-5f0a"
	f := FlagsVar(flag.NewFlagSet("serve", flag.ContinueOnError))
	f.Kind, f.CalDAVURL = KindCalDAV, "https://alice:"+password+"@dav.example/alice/tasks/"
	dests, err := f.calDAVDestinations()
	if err != nil {
		t.Fatal(err)
	}
	f.caldavDests = dests
	rec := f.recordOf("exec-1", "CalDAV collection")
	if got := rec.Destinations["default"]; got != "https://dav.example/alice/tasks/" || strings.Contains(got, password) {
		t.Errorf("recorded %q", got)
	}
}
