package davtest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Answering starts an HTTP server that answers every request with status,
// and with a Location header when location is not empty (a redirect), and
// returns a collection URL on it: a CalDAV server that refuses the login,
// lacks the collection or sends the client elsewhere. The server stops
// when the test ends.
func Answering(t testing.TB, status int, location string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s.URL + "/alice/tasks/"
}
