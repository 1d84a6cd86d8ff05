package caldav_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
