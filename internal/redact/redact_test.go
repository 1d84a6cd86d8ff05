package redact_test

import (
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/redact"
)

func TestAURLIsShownWithoutThePartsThatCanCarryASecret(t *testing.T) {
	for _, c := range []struct {
		name, raw, want string
	}{
		{"a plain URL is shown as it is", "https://dav.example.org/alice/tasks/", "https://dav.example.org/alice/tasks/"},
		{"a password in the user information is replaced", "https://alice:SECRET@dav.example.org/tasks/", "https://alice:REDACTED@dav.example.org/tasks/"},
		{"a user name alone may be a token and is replaced", "nats://SECRET@nats.example.org:4222", "nats://REDACTED@nats.example.org:4222"},
		{"a query is replaced", "https://dav.example.org/tasks/?token=SECRET", "https://dav.example.org/tasks/?REDACTED"},
		{"a fragment is replaced", "https://dav.example.org/tasks/#SECRET", "https://dav.example.org/tasks/#REDACTED"},
		{"all three at once are replaced", "https://u:SECRET@dav.example.org/t/?a=SECRET#SECRET", "https://u:REDACTED@dav.example.org/t/?REDACTED#REDACTED"},
		{"an empty query is replaced too", "https://dav.example.org/tasks/?", "https://dav.example.org/tasks/?REDACTED"},
		{"a URL that does not parse loses its user information by hand", "https://u:SECRET%zz@dav.example.org/tasks/", "https://REDACTED@dav.example.org/tasks/"},
		{"a URL that does not parse loses its query by hand", "https://dav.example.org/%zz/?token=SECRET", "https://dav.example.org/%zz/?REDACTED"},
		{"an opaque URL loses its query", "mailto:x?token=SECRET", "mailto:x?REDACTED"},
		{"a host and port without a scheme with a password", "u:SECRET@127.0.0.1:4222", "u:REDACTED@127.0.0.1:4222"},
		{"a path with an @ in it is kept", "https://dav.example.org/dav/alice@example.org/tasks/", "https://dav.example.org/dav/alice@example.org/tasks/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := redact.URL(c.raw)
			if got != c.want {
				t.Errorf("URL(%q) = %q, want %q", c.raw, got, c.want)
			}
			if strings.Contains(got, "SECRET") {
				t.Errorf("URL(%q) = %q shows the secret", c.raw, got)
			}
		})
	}
	t.Run("each URL of a list is shown without its secrets", func(t *testing.T) {
		got := redact.URLs("nats://a:SECRET@n1:4222, nats://n2:4222?x=SECRET")
		if want := "nats://a:REDACTED@n1:4222,nats://n2:4222?REDACTED"; got != want {
			t.Errorf("URLs = %q, want %q", got, want)
		}
	})
}
