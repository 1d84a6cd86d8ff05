package caldav

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
)

// secret stands for a password or token; no error may show it.
const secret = "SECRET-b7e2"

func noSecret(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("%s shows the secret: %v", what, err)
	}
}

// A collection URL that carries a secret (a password or token in its user
// information, its query or its fragment) is refused without echoing it,
// whatever else is wrong with it.
func TestARefusedCollectionURLNeverShowsItsSecret(t *testing.T) {
	for _, c := range []struct {
		name, url, says string
	}{
		{"a password in the user information", "https://alice:" + secret + "@dav.example/tasks/", "must not carry a user or password"},
		{"a token as the user name", "https://" + secret + "@dav.example/tasks/", "must not carry a user or password"},
		{"a token in the query", "https://dav.example/tasks/?token=" + secret, "query or a fragment"},
		{"a token in the fragment", "https://dav.example/tasks/#" + secret, "query or a fragment"},
		{"a password and a query at once", "https://alice:" + secret + "@dav.example/tasks/?token=" + secret, "must not carry a user or password"},
		{"another scheme with a query", "ftp://dav.example/tasks/?token=" + secret, "scheme must be http or https"},
		{"no host with a query", "https:///tasks/?token=" + secret, "names no host"},
		{"a URL that does not parse", "https://alice:" + secret + "%zz@dav.example/tasks/?token=" + secret, "does not parse"},
	} {
		t.Run(c.name+" is refused without showing it", func(t *testing.T) {
			_, err := New(Config{CollectionURL: c.url})
			noSecret(t, "the refusal", err)
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("the refusal %q does not say %q", err, c.says)
			}
			// A URL with a user is not shown at all; others are shown
			// with REDACTED where their secret was.
			if shown := strings.Contains(err.Error(), "dav.example"); shown && !strings.Contains(err.Error(), "REDACTED") {
				t.Errorf("the refusal %q shows the URL without saying where the secret was", err)
			}
		})
	}
}

// Answers that end a call with an error — no server, 401, 404, a redirect
// whose target carries a token — are reported without the password or the
// token, by Create and by Tasks alike.
func TestAFailedCallNeverShowsASecret(t *testing.T) {
	answer := func(status int, location string) string { return davtest.Answering(t, status, location) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/alice/tasks/"
	l.Close()
	for _, c := range []struct {
		name, url, says string
	}{
		{"no server listening", closed, "refused"},
		{"401", answer(http.StatusUnauthorized, ""), "401"},
		{"404", answer(http.StatusNotFound, ""), "404"},
		{"a redirect to a URL with a token", answer(http.StatusFound, "https://login.example/sso?token="+secret+"#"+secret), "302"},
		{"a redirect to a URL with a password", answer(http.StatusMovedPermanently, "https://alice:"+secret+"@dav.example/tasks/"), "301"},
	} {
		t.Run(c.name+" is reported without the secret", func(t *testing.T) {
			a, err := New(Config{CollectionURL: c.url, Username: "alice", Password: secret, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = a.Create(ctx, taskservice.Request{IntentID: "intent-1", RequestDigest: "sha256:" + strings.Repeat("ab", 32),
				Task: taskservice.Task{Title: "t"}})
			noSecret(t, "Create", err)
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("Create: %q does not say %q", err, c.says)
			}
			_, err = a.Tasks(ctx)
			noSecret(t, "Tasks", err)
		})
	}
}
