package caldav

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
)

func TestNewRefusesABadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{}, "CollectionURL is empty"},
		{"a relative URL", Config{CollectionURL: "/alice/tasks/"}, "scheme must be http or https"},
		{"another scheme", Config{CollectionURL: "ftp://dav.example/tasks/"}, "scheme must be http or https"},
		{"no host", Config{CollectionURL: "http:///tasks/"}, "names no host"},
		{"a password in the URL", Config{CollectionURL: "https://alice:secret@dav.example/tasks/"}, "must not carry a user or password"},
		{"a query", Config{CollectionURL: "https://dav.example/tasks/?x=1"}, "query or a fragment"},
		{"a fragment", Config{CollectionURL: "https://dav.example/tasks/#x"}, "query or a fragment"},
		{"a colon in the user", Config{CollectionURL: "https://dav.example/tasks/", Username: "a:b"}, "Username must not contain"},
		{"a password without a user", Config{CollectionURL: "https://dav.example/tasks/", Password: "secret"}, "Username is empty"},
		{"a negative timeout", Config{CollectionURL: "https://dav.example/tasks/", Timeout: -time.Second}, "Timeout"},
		{"a negative connection bound", Config{CollectionURL: "https://dav.example/tasks/", MaxConns: -1}, "MaxConns"},
		{"a mark key shorter than 32 bytes", Config{CollectionURL: "https://dav.example/tasks/", MarkKey: []byte("secret secret secret secret 31b")}, "MarkKey: proof: the mark key is too short: 31 bytes"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "caldav: ") {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

func TestStoreIDIsTheNormalizedCollection(t *testing.T) {
	ids := map[string]bool{}
	for _, u := range []string{"https://DAV.example:443/alice/tasks", "https://dav.example/alice/tasks/", "https://dav.example/alice//tasks/./"} {
		a, err := New(Config{CollectionURL: u})
		if err != nil {
			t.Fatal(err)
		}
		if a.CollectionURL() != "https://dav.example/alice/tasks/" {
			t.Errorf("%s normalizes to %s", u, a.CollectionURL())
		}
		ids[a.StoreID()] = true
		if !strings.HasPrefix(a.StoreID(), "caldav-") || len(a.StoreID()) != len("caldav-")+16 {
			t.Errorf("store id %q", a.StoreID())
		}
		if a.Scope() != "each caller scope, in the collection https://dav.example/alice/tasks/" {
			t.Errorf("scope %q", a.Scope())
		}
	}
	if len(ids) != 1 {
		t.Errorf("one collection, several store ids: %v", ids)
	}
	other, _ := New(Config{CollectionURL: "https://dav.example/bob/tasks/"})
	if ids[other.StoreID()] {
		t.Errorf("two collections, one store id")
	}
}

func TestStatusClassification(t *testing.T) {
	a, err := New(Config{CollectionURL: "https://dav.example/alice/tasks/", Username: "alice", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := a.resourceURL(taskservice.DefaultScope, "intent-1")
	for _, c := range []struct {
		code      int
		put       bool
		permanent bool
		says      string
	}{
		{500, true, false, "500"},
		{502, true, false, "502"},
		{503, true, false, "503"},
		{507, true, false, "507"},
		{408, true, false, "408"},
		{429, true, false, "429"},
		{401, true, true, `credentials of user "alice" were refused`},
		{403, true, true, `user "alice" may not write`},
		{404, true, true, "does not exist"},
		{409, true, true, "does not exist"},
		{301, true, true, "not followed"},
		{400, true, true, "400"},
		{415, true, true, "415"},
	} {
		resp := &http.Response{StatusCode: c.code, Status: fmt.Sprintf("%d %s", c.code, http.StatusText(c.code)), Header: http.Header{}}
		err := a.statusError("PUT", target, resp, c.put)
		if taskservice.IsPermanent(err) != c.permanent || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprint(c.code)) {
			t.Errorf("%d: %v (permanent %v); want permanent %v, saying %q", c.code, err, taskservice.IsPermanent(err), c.permanent, c.says)
		}
		if !c.permanent && !errors.Is(err, taskservice.ErrTransient) {
			t.Errorf("%d: not marked transient: %v", c.code, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%d: the error shows the password", c.code)
		}
	}
}

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

// A server that holds every PUT for a while sees at most MaxConns of them
// at once (DefaultMaxConns when unset), however many calls are made
// together; the others wait for a connection and still succeed.
func TestTheAdapterOpensAtMostMaxConnsConnectionsToTheServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		want int
	}{
		{"with MaxConns 4, four at once", 4, 4},
		{"by default, DefaultMaxConns at once", 0, DefaultMaxConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			inFlight, peak := 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				inFlight++
				peak = max(peak, inFlight)
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				inFlight--
				mu.Unlock()
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			a, err := New(Config{CollectionURL: srv.URL + "/alice/tasks/", MaxConns: tc.max, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			calls := 3 * tc.want
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for i := range calls {
				req := taskservice.Request{IntentID: fmt.Sprintf("intent-%03d", i), RequestDigest: "sha256:" + strings.Repeat("ab", 32),
					Task: taskservice.Task{Title: "held"}}
				wg.Go(func() {
					if _, err := a.Create(context.Background(), req); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("Create: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if peak != tc.want {
				t.Errorf("the server saw %d requests at once, want %d", peak, tc.want)
			}
		})
	}
}
