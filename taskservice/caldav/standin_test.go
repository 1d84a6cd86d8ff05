package caldav_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

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
		{"by default, DefaultMaxConns at once", 0, caldav.DefaultMaxConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inFlight, peak atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(50 * time.Millisecond)
				inFlight.Add(-1)
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			a := adapter(t, srv.URL+"/alice/tasks/", caldav.Config{MaxConns: tc.max, Timeout: 30 * time.Second})
			calls := 3 * tc.want
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for i := range calls {
				wg.Go(func() {
					if _, err := a.Create(context.Background(), request(fmt.Sprintf("intent-%03d", i), "held")); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("Create: %v", err)
			}
			if p := int(peak.Load()); p != tc.want {
				t.Errorf("the server saw %d requests at once, want %d", p, tc.want)
			}
		})
	}
}

// Neither CalDAV server under test redirects, so two small HTTP servers
// stand in: the collection's server answers every request with a redirect
// to another server, which must never see a request, let alone the
// password.
func TestARedirectIsNotFollowedAndThePasswordStaysWithTheCollectionsServer(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer other.Close()
	collection := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer collection.Close()

	a := adapter(t, collection.URL+"/alice/tasks/", caldav.Config{Username: "alice", Password: "s3cret"})
	_, err := a.Create(context.Background(), request("intent-redirected", "redirected"))
	if !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("Create: %v; want a permanent error naming the redirect", err)
	}
	if _, err := a.Tasks(context.Background()); !taskservice.IsPermanent(err) {
		t.Errorf("Tasks: %v; want a permanent error", err)
	}
	if err := a.Delete(context.Background(), "intent-redirected"); !taskservice.IsPermanent(err) {
		t.Errorf("Delete: %v; want a permanent error", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
