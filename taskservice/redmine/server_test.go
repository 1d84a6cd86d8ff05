package redmine_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// onServer makes an adapter for the real server s, with its locks in l.
func onServer(t *testing.T, s *redminetest.Server, locks taskservice.Locker, mod func(*redmine.Config)) *redmine.Adapter {
	t.Helper()
	cfg := redmine.Config{URL: s.URL, APIKey: s.APIKey, Project: s.Project, Field: s.FieldName, Locks: locks,
		Timeout: 10 * time.Second, LockTTL: 30 * time.Second, LockPoll: 20 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	a, err := redmine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return a
}

// issuesOf lists the issues on the server that carry the key of (scope,
// intent), whatever their digest, read from the server's own listing.
func issuesOf(t *testing.T, s *redminetest.Server, scope, intent string) []redminetest.Issue {
	t.Helper()
	var out []redminetest.Issue
	for _, is := range s.Issues(t) {
		if sc, id, _, ok := redmine.ParseMark(is.Mark); ok && sc == scope && id == intent {
			out = append(out, is)
		}
	}
	return out
}

func mustCreate(t *testing.T, svc taskservice.Service, req taskservice.Request, want taskservice.Outcome) taskservice.Result {
	t.Helper()
	res, err := svc.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%q): %v", req.IntentID, err)
	}
	if res.Outcome != want {
		t.Fatalf("Create(%q) = %+v, want %s", req.IntentID, res, want)
	}
	if err := taskservice.Check(res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestOnRedmine(t *testing.T) {
	s := redminetest.Start(t, redminetest.Options{})
	l := startLedger(t)
	a := onServer(t, s, l, nil)
	ctx := context.Background()

	t.Run("a create is replayed with the same issue, and the issue says what the request says", func(t *testing.T) {
		req := request("replay-1", digestA)
		due := "2026-12-24T17:00:00+01:00"
		req.Task.DueAt = &due
		req.Request = []byte(`{"request_id":"req-replay-1","candidate_ref":{"candidate_id":"cand-9","source_version":"v3"},
			"candidate":{"summary":"Ana will send the minutes.","evidence":[{"quote":"I'll send them tonight","start_ms":61000,"end_ms":64500}]}}`)
		first := mustCreate(t, a, req, taskservice.Created)
		again := mustCreate(t, a, req, taskservice.Replayed)
		if again.TaskID != first.TaskID || first.StoreID != a.StoreID() {
			t.Fatalf("replayed %q, created %q (store %q)", again.TaskID, first.TaskID, first.StoreID)
		}
		got := issuesOf(t, s, "default", "replay-1")
		if len(got) != 1 || redmine.TaskID(got[0].ID) != first.TaskID {
			t.Fatalf("issues on the server: %+v", got)
		}
		is := got[0]
		if is.Subject != req.Task.Title || is.DueDate != "2026-12-24" || is.Mark != redmine.Mark("default", "replay-1", digestA) {
			t.Errorf("issue: subject %q, due %q, mark %q", is.Subject, is.DueDate, is.Mark)
		}
		for _, w := range []string{"Ana will send the minutes.", "> I'll send them tonight (1:01–1:04)", "candidate cand-9 (transcript version v3)", "request req-replay-1"} {
			if !strings.Contains(is.Description, w) {
				t.Errorf("the description does not say %q:\n%s", w, is.Description)
			}
		}
	})

	t.Run("another digest is a conflict and leaves the issue as it is", func(t *testing.T) {
		first := mustCreate(t, a, request("conflict-1", digestA), taskservice.Created)
		other := request("conflict-1", digestB)
		other.Task.Title = "Something else"
		res := mustCreate(t, a, other, taskservice.Conflict)
		if res.TaskID != first.TaskID || !strings.Contains(res.Reason, digestA) {
			t.Errorf("conflict: %+v", res)
		}
		got := issuesOf(t, s, "default", "conflict-1")
		if len(got) != 1 || got[0].Subject != request("conflict-1", digestA).Task.Title || got[0].Mark != redmine.Mark("default", "conflict-1", digestA) {
			t.Fatalf("issues on the server after the conflict: %+v", got)
		}
	})

	t.Run("a closed issue still replays", func(t *testing.T) {
		first := mustCreate(t, a, request("closed-1", digestA), taskservice.Created)
		id, _ := strconv.Atoi(first.TaskID)
		s.CloseIssue(t, id)
		res := mustCreate(t, a, request("closed-1", digestA), taskservice.Replayed)
		if res.TaskID != first.TaskID {
			t.Errorf("replayed %q, want %q", res.TaskID, first.TaskID)
		}
		if got := issuesOf(t, s, "default", "closed-1"); len(got) != 1 || !got[0].Closed {
			t.Fatalf("issues: %+v", got)
		}
	})

	t.Run("two issues made by hand with one key are a permanent error naming both", func(t *testing.T) {
		mark := redmine.Mark("default", "twice-1", digestA)
		id1 := s.CreateIssue(t, "by hand", mark)
		id2 := s.CreateIssue(t, "by hand again", mark)
		for name, call := range map[string]func() error{
			"Create": func() error { _, err := a.Create(ctx, request("twice-1", digestA)); return err },
			"Find":   func() error { _, _, err := a.Find(ctx, request("twice-1", digestA)); return err },
		} {
			err := call()
			if !taskservice.IsPermanent(err) || !errors.Is(err, redmine.ErrDuplicates) {
				t.Fatalf("%s: %v, want a permanent ErrDuplicates", name, err)
			}
			for _, id := range []int{id1, id2} {
				if !strings.Contains(err.Error(), "#"+strconv.Itoa(id)) {
					t.Errorf("%s's error %q does not name issue #%d", name, err, id)
				}
			}
		}
		if got := issuesOf(t, s, "default", "twice-1"); len(got) != 2 {
			t.Fatalf("%d issues, want the 2 made by hand", len(got))
		}
	})

	t.Run("keys are told apart exactly: case, prefixes, scopes and odd characters", func(t *testing.T) {
		intents := []string{"Odd", "odd", "odd x", "odd+x", "odd%20x", "odd|x", "odd_", "odd%", "ödd", "odd x y"}
		ids := map[string]string{}
		for _, in := range intents {
			ids[in] = mustCreate(t, a, request(in, digestA), taskservice.Created).TaskID
		}
		other := request("odd", digestA)
		other.Scope = "team-b"
		ids["team-b odd"] = mustCreate(t, a, other, taskservice.Created).TaskID
		for _, in := range intents {
			if res := mustCreate(t, a, request(in, digestA), taskservice.Replayed); res.TaskID != ids[in] {
				t.Errorf("intent %q replayed %s, want %s", in, res.TaskID, ids[in])
			}
			if got := issuesOf(t, s, "default", in); len(got) != 1 {
				t.Errorf("intent %q: %d issues", in, len(got))
			}
		}
		if res := mustCreate(t, a, other, taskservice.Replayed); res.TaskID != ids["team-b odd"] {
			t.Errorf("scope team-b replayed %s, want %s", res.TaskID, ids["team-b odd"])
		}
	})

	t.Run("Find finds, creating nothing", func(t *testing.T) {
		if _, found, err := a.Find(ctx, request("find-1", digestA)); err != nil || found {
			t.Fatalf("Find before: found %v, %v", found, err)
		}
		created := mustCreate(t, a, request("find-1", digestA), taskservice.Created)
		res, found, err := a.Find(ctx, request("find-1", digestA))
		if err != nil || !found || res.Outcome != taskservice.Replayed || res.TaskID != created.TaskID {
			t.Fatalf("Find after: %+v, %v, %v", res, found, err)
		}
		if got := issuesOf(t, s, "default", "find-1"); len(got) != 1 {
			t.Fatalf("%d issues", len(got))
		}
	})

	t.Run("a deleted issue is replayed as deleted through the ledger, and not made again", func(t *testing.T) {
		svc, err := taskservice.KeepDeletedKeys(a, l)
		if err != nil {
			t.Fatal(err)
		}
		req := request("deleted-1", digestA)
		req.NotAfter = time.Now().Add(time.Hour)
		first := mustCreate(t, svc, req, taskservice.Created)
		if err := a.DeleteTask(ctx, "default", "deleted-1"); err != nil {
			t.Fatal(err)
		}
		if got := issuesOf(t, s, "default", "deleted-1"); len(got) != 0 {
			t.Fatalf("after Delete: %+v", got)
		}
		res := mustCreate(t, svc, req, taskservice.Replayed)
		if !res.TaskDeleted || res.TaskID != first.TaskID {
			t.Errorf("resend after the delete: %+v", res)
		}
		if got := issuesOf(t, s, "default", "deleted-1"); len(got) != 0 {
			t.Fatalf("the resend made an issue again: %+v", got)
		}
		if err := a.DeleteTask(ctx, "default", "deleted-1"); !errors.Is(err, redmine.ErrNoTask) {
			t.Errorf("a second Delete: %v, want ErrNoTask", err)
		}
	})

	t.Run("Naive makes an issue on every call", func(t *testing.T) {
		n := a.Naive()
		one := mustCreate(t, n, request("naive-1", digestA), taskservice.Created)
		two := mustCreate(t, n, request("naive-1", digestA), taskservice.Created)
		if one.TaskID == two.TaskID {
			t.Fatalf("one issue %s for two calls", one.TaskID)
		}
		if got := issuesOf(t, s, "default", "naive-1"); len(got) != 2 {
			t.Fatalf("%d issues, want 2", len(got))
		}
	})

	t.Run("a title longer than Redmine's subject is cut, and kept whole in the description", func(t *testing.T) {
		req := request("long-1", digestA)
		req.Task.Title = strings.Repeat("x", 300)
		mustCreate(t, a, req, taskservice.Created)
		got := issuesOf(t, s, "default", "long-1")
		if len(got) != 1 {
			t.Fatalf("%d issues", len(got))
		}
		if n := len([]rune(got[0].Subject)); n != redmine.MaxSubjectRunes || !strings.HasSuffix(got[0].Subject, "…") {
			t.Errorf("subject of %d letters %q, want %d ending in an ellipsis", n, got[0].Subject, redmine.MaxSubjectRunes)
		}
		if !strings.Contains(got[0].Description, req.Task.Title) {
			t.Errorf("the description does not hold the whole title:\n%s", got[0].Description)
		}
	})

	t.Run("a due date in the past is taken where Redmine starts an issue on its day of creation", func(t *testing.T) {
		// Redmine's own default; the rig turns it off.
		s.Rails(t, "Setting.default_issue_start_date_to_creation_date = '1'")
		defer s.Rails(t, "Setting.default_issue_start_date_to_creation_date = '0'")
		req := request("past-1", digestA)
		due := "2020-01-02T10:00:00Z"
		req.Task.DueAt = &due
		mustCreate(t, a, req, taskservice.Created)
		if got := issuesOf(t, s, "default", "past-1"); len(got) != 1 || got[0].DueDate != "2020-01-02" {
			t.Fatalf("issues %+v, want one due 2020-01-02", got)
		}
	})

	t.Run("a 422 from Redmine is permanent with its message", func(t *testing.T) {
		s.Rails(t, "IssueCustomField.find("+strconv.Itoa(s.FieldID)+").update!(max_length: 10)")
		defer s.Rails(t, "IssueCustomField.find("+strconv.Itoa(s.FieldID)+").update!(max_length: nil)")
		_, err := a.Create(ctx, request("short-field-1", digestA))
		if !taskservice.IsPermanent(err) || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "is too long") {
			t.Fatalf("Create with a mark longer than the field: %v", err)
		}
		if got := issuesOf(t, s, "default", "short-field-1"); len(got) != 0 {
			t.Fatalf("%d issues", len(got))
		}
	})

	t.Run("a key an issue carries is answered at once while its lock is held, as after a lost create", func(t *testing.T) {
		req := request("held-1", digestA)
		first := mustCreate(t, a, req, taskservice.Created)
		lk, err := l.Lock(ctx, "default", "held-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lk.Release(ctx) }()
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		res, err := a.Create(short, req)
		if err != nil || res.Outcome != taskservice.Replayed || res.TaskID != first.TaskID {
			t.Fatalf("Create while the lock is held: %+v, %v; want replayed %s without waiting for the lock", res, err, first.TaskID)
		}
	})

	t.Run("Issues lists the marked issues and counts them all", func(t *testing.T) {
		s.CreateIssue(t, "not ours", "")
		list, err := a.Issues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all := s.Issues(t)
		marked := 0
		for _, is := range all {
			if _, _, _, ok := redmine.ParseMark(is.Mark); ok {
				marked++
			}
		}
		if list.Total != len(all) || len(list.Issues) != marked || marked == len(all) {
			t.Fatalf("Issues: %d marked of %d; the server lists %d marked of %d", len(list.Issues), list.Total, marked, len(all))
		}
	})
}

// alwaysGrants is a Locker that grants every lock at once and keeps no
// in-doubt record: the lock taken out, to show what it prevents.
type alwaysGrants struct{}

func (alwaysGrants) Doubt(context.Context, string, string, time.Duration) (taskservice.Doubt, error) {
	return taskservice.Doubt{}, nil
}

func (alwaysGrants) Doubted(context.Context, string, string) (taskservice.Doubt, bool, error) {
	return taskservice.Doubt{}, false, nil
}

func (alwaysGrants) Settle(context.Context, string, string) error { return nil }

func (alwaysGrants) Lock(context.Context, string, string, time.Duration) (taskservice.Lock, error) {
	return granted{}, nil
}

type granted struct{}

func (granted) Held(context.Context) error    { return nil }
func (granted) Release(context.Context) error { return nil }

// 64 concurrent calls with one key, through two adapters (two executors)
// that share one ledger on one JetStream: one issue. With the lock taken
// out, the same calls make more than one.
func TestConcurrentCreatesMakeOneIssue(t *testing.T) {
	s := redminetest.Start(t, redminetest.Options{})
	l := startLedger(t)
	const calls = 64
	for _, tc := range []struct {
		name  string
		locks taskservice.Locker
		one   bool
	}{
		{"with the ledger's lock, 64 calls make one issue", l, true},
		{"without a lock, 64 calls make more than one issue", alwaysGrants{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intent := "concurrent-" + strconv.FormatBool(tc.one)
			var mod func(*redmine.Config)
			if !tc.one {
				// Without a lock, whether two calls both find nothing
				// depends on timing (a call that looks after the first
				// POST is saved finds it): the POSTs are held until two
				// are on their way, so that the race is run, not hoped for.
				held := &postGate{n: 2, released: make(chan struct{})}
				mod = func(c *redmine.Config) { c.HTTPClient = &http.Client{Transport: held, Timeout: 10 * time.Second} }
			}
			adapters := []*redmine.Adapter{onServer(t, s, tc.locks, mod), onServer(t, s, tc.locks, mod)}
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[taskservice.Outcome]int{}
			var errs []error
			start := make(chan struct{})
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := adapters[i%2].Create(context.Background(), request(intent, digestA))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					outcomes[res.Outcome]++
				}()
			}
			close(start)
			wg.Wait()
			got := issuesOf(t, s, "default", intent)
			received, createdN := s.Posts()
			dups := 0
			for _, err := range errs {
				if errors.Is(err, redmine.ErrDuplicates) {
					dups++
				}
			}
			t.Logf("%s: %d issues on the server, outcomes %v, %d errors (%d of them: more than one issue carries the key); the server's log so far: %d POSTs received, %d created", tc.name, len(got), outcomes, len(errs), dups, received, createdN)
			if tc.one {
				if len(errs) > 0 {
					t.Fatalf("errors: %v", errs[0])
				}
				if len(got) != 1 || outcomes[taskservice.Created] != 1 || outcomes[taskservice.Replayed] != calls-1 {
					t.Fatalf("%d issues, outcomes %v: want 1 issue, 1 created and %d replayed", len(got), outcomes, calls-1)
				}
			} else if len(got) < 2 {
				t.Fatalf("%d issue(s) without a lock: the test cannot show what the lock prevents", len(got))
			}
		})
	}
}

// A create whose answer is lost (the proxy drops it after Redmine made the
// issue) is retried: the key is left in doubt, the retry finds the issue,
// replays it and settles the key.
func TestALostReplyIsReplayed(t *testing.T) {
	s := redminetest.Start(t, redminetest.Options{})
	l := startLedger(t)
	p := davtest.NewProxy(t, s.URL)
	a := onServer(t, s, l, func(c *redmine.Config) {
		c.URL = p.URL
		c.LockTTL = 4 * time.Second
		c.HTTPClient = &http.Client{Timeout: 3 * time.Second, Transport: dropPostAnswers{p: p, rt: http.DefaultTransport}}
	})
	ctx := context.Background()
	_, err := a.Create(ctx, request("lost-1", digestA))
	if err == nil || taskservice.IsPermanent(err) {
		t.Fatalf("Create with its answer lost: %v, want a transient error", err)
	}
	if p.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d answers, want 1", p.Dropped())
	}
	if got := issuesOf(t, s, "default", "lost-1"); len(got) != 1 {
		t.Fatalf("after the lost answer: %d issues, want the 1 Redmine made", len(got))
	}
	if _, found, err := l.Doubted(ctx, "default", "lost-1"); !found || err != nil {
		t.Fatalf("the key after the lost answer: in doubt %v (%v), want in doubt", found, err)
	}
	res := mustCreate(t, a, request("lost-1", digestA), taskservice.Replayed)
	got := issuesOf(t, s, "default", "lost-1")
	if len(got) != 1 || redmine.TaskID(got[0].ID) != res.TaskID {
		t.Fatalf("after the retry: %+v, replayed %s", got, res.TaskID)
	}
	if _, found, err := l.Doubted(ctx, "default", "lost-1"); found || err != nil {
		t.Fatalf("the key after the retry found its issue: in doubt %v (%v), want settled", found, err)
	}
}

// dropPostAnswers tells the proxy to drop the answer of every POST it
// carries.
type dropPostAnswers struct {
	p  *davtest.Proxy
	rt http.RoundTripper
}

func (d dropPostAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		d.p.DropResponses(1)
	}
	return d.rt.RoundTrip(r)
}

// postGate holds every POST until n are waiting (or 5 s have passed), then
// lets them go one at a time: calls that looked a key up and found nothing
// are all on their way to create before any create is saved, and Redmine
// saves them one after another (two at once can deadlock in its SQLite
// database, failing one of them after 20 s).
type postGate struct {
	n        int
	mu       sync.Mutex
	waiting  int
	released chan struct{}
	one      sync.Mutex // held by the POST on its way
}

func (g *postGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost {
		return http.DefaultTransport.RoundTrip(req)
	}
	g.mu.Lock()
	g.waiting++
	if g.waiting == g.n {
		close(g.released)
	}
	g.mu.Unlock()
	select {
	case <-g.released:
	case <-time.After(5 * time.Second):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	g.one.Lock()
	defer g.one.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}
