package davtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a server (an httptest one: the proxy is plain HTTP) that
// counts the requests it handled, by method.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64, *atomic.Int64) {
	var gets, posts atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(http.StatusCreated)
		} else {
			gets.Add(1)
		}
		_, _ = io.WriteString(w, r.Method)
	}))
	t.Cleanup(s.Close)
	return s, &gets, &posts
}

func do(t *testing.T, method, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestProxyDropsTheAnswersOfOneMethodOnly(t *testing.T) {
	s, gets, posts := counting(t)
	p := NewProxy(t, s.URL)
	p.DropResponsesTo(http.MethodPost, 1)
	if got, err := do(t, http.MethodGet, p.URL+"/issues.json"); err != nil || got != "GET" {
		t.Fatalf("the GET before the POST: %q, %v; want its answer", got, err)
	}
	if got, err := do(t, http.MethodPost, p.URL+"/issues.json"); err == nil {
		t.Fatalf("the POST got its answer %q, want it dropped", got)
	}
	if got, err := do(t, http.MethodPost, p.URL+"/issues.json"); err != nil || got != "POST" {
		t.Fatalf("the second POST: %q, %v; want its answer", got, err)
	}
	if gets.Load() != 1 || posts.Load() != 2 || p.Dropped() != 1 {
		t.Errorf("the server handled %d GETs and %d POSTs, the proxy dropped %d answers; want 1, 2, 1", gets.Load(), posts.Load(), p.Dropped())
	}
}

func TestProxyHoldsARequestOrItsAnswerUntilReleased(t *testing.T) {
	for _, answer := range []bool{false, true} {
		name := map[bool]string{false: "a held POST reaches the server only when released", true: "a held answer reaches the client only when released, the server having handled the POST"}[answer]
		t.Run(name, func(t *testing.T) {
			s, _, posts := counting(t)
			p := NewProxy(t, s.URL)
			hold := p.HoldRequest
			if answer {
				hold = p.HoldAnswer
			}
			h := hold(http.MethodPost, "/issues")
			// Another method, and another path, pass.
			if got, err := do(t, http.MethodGet, p.URL+"/issues.json"); err != nil || got != "GET" {
				t.Fatalf("a GET: %q, %v", got, err)
			}
			if got, err := do(t, http.MethodPost, p.URL+"/other"); err != nil || got != "POST" {
				t.Fatalf("a POST elsewhere: %q, %v", got, err)
			}
			done := make(chan string, 1)
			go func() {
				got, _ := do(t, http.MethodPost, p.URL+"/issues.json")
				done <- got
			}()
			select {
			case <-h.Caught():
			case <-time.After(10 * time.Second):
				t.Fatal("the hold caught nothing")
			}
			handled := posts.Load()
			select {
			case got := <-done:
				t.Fatalf("the client got %q before the release", got)
			case <-time.After(200 * time.Millisecond):
			}
			if want := map[bool]int64{false: 1, true: 2}[answer]; handled != want {
				t.Errorf("while held the server handled %d POSTs, want %d", handled, want)
			}
			h.Release()
			if got := <-done; got != "POST" {
				t.Errorf("after the release the client got %q", got)
			}
			if posts.Load() != 2 {
				t.Errorf("the server handled %d POSTs, want 2", posts.Load())
			}
			// Released, the hold is gone: the next POST passes.
			if got, err := do(t, http.MethodPost, p.URL+"/issues.json"); err != nil || got != "POST" {
				t.Fatalf("the POST after: %q, %v", got, err)
			}
		})
	}
	t.Run("a hold released before it caught anything is disarmed", func(t *testing.T) {
		s, _, _ := counting(t)
		p := NewProxy(t, s.URL)
		h := p.HoldRequest(http.MethodPost, "/")
		h.Release()
		if got, err := do(t, http.MethodPost, p.URL+"/issues.json"); err != nil || got != "POST" {
			t.Fatalf("a POST after the disarmed hold: %q, %v", got, err)
		}
	})
}
