package redmine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

func TestNewRefusesABadConfig(t *testing.T) {
	l := startLedger(t)
	good := redmine.Config{URL: "https://redmine.example/", APIKey: apiKey, Project: "demo", Locks: l}
	for _, tc := range []struct {
		name string
		mod  func(*redmine.Config)
		says string
	}{
		{"an empty URL", func(c *redmine.Config) { c.URL = "" }, "URL is empty"},
		{"another scheme", func(c *redmine.Config) { c.URL = "ftp://redmine.example/" }, "scheme must be http or https"},
		{"a URL with a user and password", func(c *redmine.Config) { c.URL = "https://alice:" + apiKey + "@redmine.example/" }, "must not carry a user"},
		{"a URL with a key in its query", func(c *redmine.Config) { c.URL = "https://redmine.example/?key=" + apiKey }, "query or a fragment"},
		{"a URL with no host", func(c *redmine.Config) { c.URL = "https:///x" }, "names no host"},
		{"no API key", func(c *redmine.Config) { c.APIKey = " " }, "API key is empty"},
		{"an API key with a line break", func(c *redmine.Config) { c.APIKey = apiKey + "\n" }, "line break"},
		{"no project", func(c *redmine.Config) { c.Project = "" }, "neither a numeric id nor a project identifier"},
		{"a project with a slash", func(c *redmine.Config) { c.Project = "a/b" }, "neither a numeric id nor a project identifier"},
		{"no lock store", func(c *redmine.Config) { c.Locks = nil }, "Locks is nil"},
		{"a negative lock TTL", func(c *redmine.Config) { c.LockTTL = -time.Second }, "LockTTL"},
		{"a lock store that keeps no in-doubt records", func(c *redmine.Config) { c.Locks = onlyLocks{l} }, "keeps no in-doubt records"},
		{"a negative request lifetime", func(c *redmine.Config) { c.RequestLifetime = -time.Second }, "RequestLifetime"},
		{"a request lifetime shorter than the HTTP timeout", func(c *redmine.Config) { c.RequestLifetime = 29 * time.Second; c.Timeout = 30 * time.Second },
			"RequestLifetime 29s is shorter than the HTTP timeout 30s"},
		{"a negative MaxConns", func(c *redmine.Config) { c.MaxConns = -1 }, "MaxConns"},
		{"a mark key shorter than 32 bytes", func(c *redmine.Config) { c.MarkKey = []byte("a-secret-mark-key-of-31-bytes!!") }, "mark key is too short: 31 bytes"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			cfg := good
			tc.mod(&cfg)
			_, err := redmine.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.says)
			}
			noKey(t, "the refusal", err)
			if cfg.MarkKey != nil && strings.Contains(err.Error(), string(cfg.MarkKey)) {
				t.Errorf("the refusal shows the mark key: %v", err)
			}
		})
	}
	t.Run("accepts a good config and normalizes its URL", func(t *testing.T) {
		cfg := good
		cfg.URL = "HTTPS://Redmine.Example:443/tracker"
		a, err := redmine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.URL() != "https://redmine.example/tracker/" {
			t.Errorf("URL() = %q", a.URL())
		}
		b, _ := redmine.New(good)
		if a.StoreID() == b.StoreID() || !strings.HasPrefix(a.StoreID(), "redmine-") {
			t.Errorf("store ids %q and %q: want two, both redmine-…", a.StoreID(), b.StoreID())
		}
	})
}

// Answers a real Redmine gives only when it is broken, or that stand in
// for a proxy in front of it, classified.
func TestCheckClassifiesTheServersAnswers(t *testing.T) {
	l := startLedger(t)
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		location  string
		permanent bool
		says      []string
	}{
		{"a 500 is transient", 500, `<html>boom</html>`, "", false, []string{"500"}},
		{"a 503 is transient", 503, ``, "", false, []string{"503"}},
		{"a 401 is permanent and says the key was refused", 401, ``, "", true, []string{"401", "API key was refused"}},
		{"a 403 is permanent", 403, ``, "", true, []string{"403", "not allowed"}},
		{"a 404 is permanent", 404, ``, "", true, []string{"404", "not found"}},
		{"a 422 is permanent with the server's message", 422, `{"errors":["Subject cannot be blank","Tracker is invalid"]}`, "", true,
			[]string{"422", "Subject cannot be blank; Tracker is invalid"}},
		{"a 422 that echoes the API key is shown without it", 422, `{"errors":["key ` + apiKey + ` is odd"]}`, "", true, []string{"422", "key [API key] is odd"}},
		{"a redirect is not followed and its target shown without its query", 302, ``, "https://login.example/sso?token=" + apiKey, true,
			[]string{"302", "https://login.example/sso?REDACTED", "not followed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var followed atomic.Int32
			s := newStub(t, created)
			s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/sso" {
					followed.Add(1)
				}
				if tc.location != "" {
					w.Header().Set("Location", tc.location)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			a := adapter(t, s.URL, l, nil)
			err := a.Check(context.Background())
			if err == nil {
				t.Fatal("Check: no error")
			}
			if got := taskservice.IsPermanent(err); got != tc.permanent {
				t.Errorf("permanent = %v, want %v: %v", got, tc.permanent, err)
			}
			if !tc.permanent && !errors.Is(err, taskservice.ErrTransient) {
				t.Errorf("not marked transient: %v", err)
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %q", err, w)
				}
			}
			noKey(t, "the error", err)
			if followed.Load() != 0 {
				t.Error("the redirect was followed")
			}
		})
	}
}

func TestAHangingServerIsTransient(t *testing.T) {
	l := startLedger(t)
	release := make(chan struct{})
	s := newStub(t, created)
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	a := adapter(t, s.URL, l, func(c *redmine.Config) { c.Timeout = 200 * time.Millisecond })
	err := a.Check(context.Background())
	if err == nil || taskservice.IsPermanent(err) || !errors.Is(err, taskservice.ErrTransient) {
		t.Fatalf("Check against a hanging server: %v, want a transient error", err)
	}
	noKey(t, "the error", err)
}

func TestNoServerIsTransientAndShowsNoKey(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	url := s.URL
	s.Close()
	a := adapter(t, url, l, nil)
	_, err := a.Create(context.Background(), request("i-1", digestA))
	if err == nil || taskservice.IsPermanent(err) {
		t.Fatalf("Create with no server: %v, want a transient error", err)
	}
	noKey(t, "the error", err)
}

// The API key goes in its header on every request, never in a URL.
func TestTheKeyTravelsOnlyInItsHeader(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	a := adapter(t, s.URL, l, nil)
	res, err := a.Create(context.Background(), request("i-1", digestA))
	if err != nil || res.Outcome != taskservice.Created || res.TaskID != "41" {
		t.Fatalf("Create: %+v, %v", res, err)
	}
	if s.keyMissing.Load() != 0 || s.keyInURL.Load() != 0 {
		t.Errorf("requests without the key header: %d; with the key in the URL: %d", s.keyMissing.Load(), s.keyInURL.Load())
	}
}

// refusePosts fails every POST as a refused connection does, before a
// byte is sent, and passes the other requests on.
type refusePosts struct{}

func (refusePosts) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A POST whose connection could not be made never left: transient, and
// the key is not left in doubt.
func TestAPostNeverSentLeavesNoDoubt(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	a := adapter(t, s.URL, l, func(c *redmine.Config) {
		c.HTTPClient = &http.Client{Transport: refusePosts{}, Timeout: 2 * time.Second}
	})
	_, err := a.Create(context.Background(), request("i-1", digestA))
	if err == nil || taskservice.IsPermanent(err) || errors.Is(err, taskservice.ErrInDoubt) {
		t.Fatalf("Create with its POST refused: %v, want a transient error", err)
	}
	if _, found, err := l.Doubted(context.Background(), "default", "i-1"); found || err != nil {
		t.Fatalf("in doubt after a POST that never left: %v, %v", found, err)
	}
}

// onlyLocks is a Locker that keeps no in-doubt records.
type onlyLocks struct{ l taskservice.Locker }

func (o onlyLocks) Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (taskservice.Lock, error) {
	return o.l.Lock(ctx, scope, intentID, ttl)
}

// What the POST's answer means for the key: after an answer its in-doubt
// record is removed; when the answer is lost or a 5xx (the issue may
// exist) the record stays for the request lifetime, and a create meanwhile
// that finds no issue is refused in doubt, sending nothing. The lock is
// released either way.
func TestALostCreateLeavesItsKeyInDoubt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		post      http.HandlerFunc
		timeout   time.Duration
		wantErr   bool
		permanent bool
		says      string
		kept      bool
	}{
		{"a created issue settles the key", created, 0, false, false, "", false},
		{"a 422 is permanent with Redmine's message and settles the key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(422)
			_, _ = w.Write([]byte(`{"errors":["Due date must be greater than start date"]}`))
		}, 0, true, true, "Due date must be greater than start date", false},
		{"a 502 is transient and leaves the key in doubt", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(502)
		}, 0, true, false, "502", true},
		{"a connection lost before the answer is transient and leaves the key in doubt", func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, 0, true, false, "POST", true},
		{"an answer slower than the timeout is transient and leaves the key in doubt", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client hang up
			<-r.Context().Done()
		}, 300 * time.Millisecond, true, false, "POST", true},
		{"a 201 without the mark is permanent and settles the key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"issue": map[string]any{"id": 42, "custom_fields": []any{}}})
		}, 0, true, true, "did not keep its mark", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLedger(t)
			s := newStub(t, tc.post)
			a := adapter(t, s.URL, l, func(c *redmine.Config) {
				if tc.timeout > 0 {
					c.Timeout = tc.timeout
				}
			})
			ctx := context.Background()
			_, err := a.Create(ctx, request("i-1", digestA))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Create: %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil {
				if taskservice.IsPermanent(err) != tc.permanent {
					t.Errorf("permanent = %v, want %v: %v", taskservice.IsPermanent(err), tc.permanent, err)
				}
				if !strings.Contains(err.Error(), tc.says) {
					t.Errorf("the error %q does not say %q", err, tc.says)
				}
				noKey(t, "the error", err)
			}
			lk, lerr := l.Lock(ctx, "default", "i-1", time.Minute)
			if lerr != nil {
				t.Fatalf("the lock after the create: %v, want it released", lerr)
			}
			_ = lk.Release(ctx)
			d, doubted, derr := l.Doubted(ctx, "default", "i-1")
			if derr != nil || doubted != tc.kept {
				t.Fatalf("in doubt after the create = %v (%v), want %v", doubted, derr, tc.kept)
			}
			if !doubted {
				return
			}
			if life := d.Until.Sub(d.Started); life < time.Minute {
				t.Errorf("in doubt for %v, want at least the request lifetime of 1m", life)
			}
			_, err = a.Create(ctx, request("i-1", digestA))
			if until, ok := taskservice.InDoubtUntil(err); !ok || !until.Equal(d.Until) || !strings.Contains(err.Error(), "in doubt") {
				t.Errorf("a create while in doubt: %v (until %v), want InDoubt until %v", err, until, d.Until)
			}
			if n := s.posts.Load(); n != 1 {
				t.Errorf("%d POSTs, want the first one only", n)
			}
		})
	}
}

// cancelOnHeld is a Locker that ends a call's context the first time
// the lock it asks for comes back held by another.
type cancelOnHeld struct {
	*ledger.Ledger
	cancel context.CancelFunc
}

func (c cancelOnHeld) Lock(ctx context.Context, scope, intentID string, ttl time.Duration) (taskservice.Lock, error) {
	lk, err := c.Ledger.Lock(ctx, scope, intentID, ttl)
	if errors.Is(err, taskservice.ErrLocked) {
		c.cancel()
	}
	return lk, err
}

// A Create whose key's lock another caller holds waits until its context
// ends, creating nothing, and says so (transient, ErrLocked).
func TestCreateWaitsForAHeldLock(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	// The call's context ends once a try of the lock has come back held,
	// however long that try took on a loaded machine.
	bg := context.Background()
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	a := adapter(t, s.URL, cancelOnHeld{l, cancel}, nil)
	if err := a.Check(bg); err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(bg, "default", "i-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Create(ctx, request("i-1", digestA))
	if !errors.Is(err, taskservice.ErrLocked) || taskservice.IsPermanent(err) {
		t.Fatalf("Create with the lock held: %v, want a transient ErrLocked", err)
	}
	if s.posts.Load() != 0 {
		t.Fatalf("%d POSTs with the lock held by another", s.posts.Load())
	}
	t.Run("and goes on once the lock is released", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := a.Create(bg, request("i-1", digestA))
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		_ = lk.Release(bg)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s.posts.Load() != 1 {
			t.Fatalf("%d POSTs, want 1", s.posts.Load())
		}
	})
}

func TestBadRequestsAreRefusedWithoutARequest(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	a := adapter(t, s.URL, l, nil)
	for _, tc := range []struct {
		name string
		mod  func(*taskservice.Request)
		says string
	}{
		{"a bad scope", func(r *taskservice.Request) { r.Scope = "_x" }, "scope"},
		{"an empty intent id", func(r *taskservice.Request) { r.IntentID = "" }, "intent id is empty"},
		{"a bad digest", func(r *taskservice.Request) { r.RequestDigest = "md5:00" }, "request digest"},
		{"an empty title", func(r *taskservice.Request) { r.Task.Title = "  " }, "title is empty"},
		{"a bad due date", func(r *taskservice.Request) { d := "next week"; r.Task.DueAt = &d }, "due_at"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			req := request("i-1", digestA)
			tc.mod(&req)
			_, err := a.Create(context.Background(), req)
			if !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Create: %v, want a permanent error saying %q", err, tc.says)
			}
		})
	}
	if s.posts.Load() != 0 {
		t.Errorf("%d POSTs for refused requests", s.posts.Load())
	}
}

// A lookup (two pages, each answered within the HTTP timeout) slower than
// the lock's TTL: the lock is lost before the create, and the create is not
// sent (another caller may hold the lock now).
func TestALockLostDuringTheLookupStopsTheCreate(t *testing.T) {
	l := startLedger(t)
	s := newStub(t, created)
	rest := s.Config.Handler
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/issues.json" && strings.HasPrefix(r.URL.Query().Get("cf_7"), "^") {
			time.Sleep(700 * time.Millisecond) // two pages: longer than the lock's 1 s
			issues := []any{}
			if r.URL.Query().Get("offset") == "0" {
				for i := range 100 {
					issues = append(issues, map[string]any{"id": 1000 + i, "subject": "not ours"})
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"issues": issues, "total_count": 101})
			return
		}
		rest.ServeHTTP(w, r)
	})
	a := adapter(t, s.URL, l, func(c *redmine.Config) { c.LockTTL = time.Second; c.Timeout = 900 * time.Millisecond })
	_, err := a.Create(context.Background(), request("i-1", digestA))
	if !errors.Is(err, taskservice.ErrLockLost) || taskservice.IsPermanent(err) {
		t.Fatalf("Create: %v, want a transient ErrLockLost", err)
	}
	if s.posts.Load() != 0 {
		t.Fatalf("%d POSTs after the lock was lost", s.posts.Load())
	}
}
