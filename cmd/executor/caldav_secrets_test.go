package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/davtest"
)

// secretToken stands for a password or token in a CalDAV URL or login; no
// output of a command may show it.
const secretToken = "SECRET-4c19"

func showsSecret(texts ...string) bool {
	for _, s := range texts {
		if strings.Contains(s, secretToken) {
			return true
		}
	}
	return false
}

// A --caldav-url that carries a token in its query, or a password in its
// user information, is refused by every command that takes it, without
// echoing either in the error or on stderr.
func TestACalDAVURLWithASecretIsRefusedWithoutShowingIt(t *testing.T) {
	bad := "http://alice:" + secretToken + "@127.0.0.1:1/alice/tasks/?token=" + secretToken
	query := "http://127.0.0.1:1/alice/tasks/?token=" + secretToken
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve with a password and a token", []string{"serve", "--insecure-allow-unsigned", "--server", "nats://127.0.0.1:1", "--task-service", "caldav", "--caldav-url", bad}},
		{"serve with a token in the query", []string{"serve", "--insecure-allow-unsigned", "--server", "nats://127.0.0.1:1", "--task-service", "caldav", "--caldav-url", query}},
		{"serve --check-config", []string{"serve", "--check-config", "--insecure-allow-unsigned", "--task-service", "caldav", "--caldav-url", query}},
		{"probe", []string{"probe", "--task-service", "caldav", "--caldav-url", bad, "--yes"}},
		{"demo", []string{"demo", "--task-service", "caldav", "--caldav-url", query}},
	} {
		t.Run(c.name+" is refused without showing the secret", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, c.args, &out, &errOut)
			if err == nil {
				t.Fatalf("%v passed", c.args)
			}
			if exitCode(err) != 2 {
				t.Errorf("%v: %v (exit %d), want a usage error (exit 2)", c.args, err, exitCode(err))
			}
			if showsSecret(err.Error(), out.String(), errOut.String()) {
				t.Errorf("%v shows the secret:\n%v\n%s%s", c.args, err, out.String(), errOut.String())
			}
			if strings.Contains(err.Error(), "127.0.0.1:1") && !strings.Contains(err.Error(), "REDACTED") {
				t.Errorf("the error %q shows the URL without saying where the secret was", err)
			}
		})
	}
}

// probe against a CalDAV server that refuses the login, or redirects to a
// URL with a token, reports it without the password or the token.
func TestProbeOfACalDAVServerThatRefusesShowsNoSecret(t *testing.T) {
	serve := func(status int, location string) string { return davtest.Answering(t, status, location) }
	for _, c := range []struct {
		name, url, says string
	}{
		{"a refused login", serve(http.StatusUnauthorized, ""), "401"},
		{"a missing collection", serve(http.StatusNotFound, ""), "404"},
		{"a redirect to a login page with a token", serve(http.StatusFound, "https://login.example/sso?token="+secretToken), "302"},
	} {
		t.Run(c.name+" is reported without the secret", func(t *testing.T) {
			t.Setenv(service.CalDAVPasswordEnv, secretToken)
			out, errOut, err := runProbeCmd(t, "--task-service", "caldav", "--caldav-url", c.url, "--caldav-user", "alice", "--yes")
			if exitCode(err) != 1 {
				t.Fatalf("probe ended with %v (exit %d), want exit 1\n%s%s", err, exitCode(err), out, errOut)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("the error %q does not say %s", err, c.says)
			}
			if showsSecret(err.Error(), out, errOut) {
				t.Errorf("probe shows the secret:\n%v\n%s%s", err, out, errOut)
			}
		})
	}
}
