package redmine_test

// A create whose outcome is unknown leaves its key in doubt: attack 6 of
// docs/SECURITY.md (a POST held by a slow proxy past the lock, a lock
// purged while the POST is in flight), against a real Redmine behind a
// proxy and a real embedded NATS ledger.

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// heldRig is a Redmine, a proxy in front of it, one ledger, and two
// adapters on that ledger (two executors): first reaches Redmine through
// the proxy, second directly.
type heldRig struct {
	s             *redminetest.Server
	proxy         *davtest.Proxy
	l             *ledger.Ledger
	purge         func(key string) error
	first, second *redmine.Adapter
}

// startHeldRig starts the rig, both adapters with lockTTL, the HTTP
// timeout and the request lifetime.
func startHeldRig(t *testing.T, lockTTL, timeout, lifetime time.Duration) *heldRig {
	s := redminetest.Start(t, redminetest.Options{})
	js := testenv.JetStream(t)
	r := &heldRig{s: s, proxy: davtest.NewProxy(t, s.URL), l: testenv.Ledger(t, js, ledger.Options{})}
	r.purge = func(key string) error {
		kv, err := js.KeyValue(context.Background(), ledger.Bucket)
		if err != nil {
			return err
		}
		return kv.Purge(context.Background(), key)
	}
	mod := func(url string) func(*redmine.Config) {
		return func(c *redmine.Config) {
			c.URL, c.LockTTL, c.Timeout = url, lockTTL, timeout
			c.RequestLifetime = lifetime
		}
	}
	r.first = onServer(t, s, r.l, mod(r.proxy.URL))
	r.second = onServer(t, s, r.l, mod(s.URL))
	return r
}

// createAsync runs a's Create of req and hands back its answer.
func createAsync(a *redmine.Adapter, req taskservice.Request) <-chan createAnswer {
	out := make(chan createAnswer, 1)
	go func() {
		res, err := a.Create(context.Background(), req)
		out <- createAnswer{res, err}
	}()
	return out
}

type createAnswer struct {
	res taskservice.Result
	err error
}

// caught waits until h holds its request.
func caught(t *testing.T, h *davtest.Hold) {
	t.Helper()
	select {
	case <-h.Caught():
	case <-time.After(30 * time.Second):
		t.Fatal("the POST never reached the proxy")
	}
}

// wantInDoubt checks that a create by a while the first POST may still
// land is refused in doubt, until a time ahead within lifetime and a
// margin, and sends nothing.
func wantInDoubt(t *testing.T, r *heldRig, a *redmine.Adapter, req taskservice.Request, lifetime time.Duration) time.Time {
	t.Helper()
	res, err := a.Create(context.Background(), req)
	until, ok := taskservice.InDoubtUntil(err)
	if !ok || !errors.Is(err, taskservice.ErrInDoubt) || taskservice.IsPermanent(err) {
		t.Fatalf("a create while the first POST may still land: %+v, %v; want a transient error marked InDoubt", res, err)
	}
	if now := time.Now(); !until.After(now) || until.After(now.Add(lifetime+5*time.Second)) {
		t.Errorf("in doubt until %v, want a time after now (%v) within the request lifetime %v", until, now, lifetime)
	}
	if got := issuesOf(t, r.s, "default", req.IntentID); len(got) != 0 {
		t.Fatalf("the create in doubt made issues %+v", got)
	}
	return until
}

// A slow proxy holds the first executor's POST longer than the lock's TTL
// and longer than that executor waits for it (its HTTP timeout); a second
// executor meanwhile finds no issue and the lock free, and must not
// create: the key is in doubt. Once the held POST lands, the second
// executor's create finds the issue and replays it: one issue.
func TestAPostHeldLongerThanTheLockMakesOneIssue(t *testing.T) {
	const lockTTL, timeout, lifetime = 2 * time.Second, time.Second, 8 * time.Second
	r := startHeldRig(t, lockTTL, timeout, lifetime)
	req := request("held-post-1", digestA)
	hold := r.proxy.HoldRequest(http.MethodPost, "/issues.json")
	firstDone := createAsync(r.first, req)
	caught(t, hold)
	time.Sleep(lockTTL + 500*time.Millisecond) // the lock has run out
	if a := <-firstDone; a.err == nil || taskservice.IsPermanent(a.err) {
		t.Fatalf("the first create, its POST held past its timeout: %+v, %v; want a transient error", a.res, a.err)
	}
	wantInDoubt(t, r, r.second, req, lifetime)
	hold.Release() // the held POST lands now
	res := mustCreate(t, r.second, req, taskservice.Replayed)
	got := issuesOf(t, r.s, "default", req.IntentID)
	if len(got) != 1 || redmine.TaskID(got[0].ID) != res.TaskID {
		t.Fatalf("issues %+v, replayed %s: want the one issue the held POST made", got, res.TaskID)
	}
	if _, found, err := r.l.Doubted(context.Background(), "default", req.IntentID); found || err != nil {
		t.Errorf("in doubt after the issue was found: %v, %v", found, err)
	}
}

// The executor role purges the key's lock while the first executor's POST
// is held: a second executor takes the lock, finds no issue, and must not
// create. The first POST then lands and answers created; the second
// executor replays it: one issue.
func TestALockPurgedDuringThePostMakesOneIssue(t *testing.T) {
	const lockTTL, timeout, lifetime = 10 * time.Second, 5 * time.Second, 8 * time.Second
	r := startHeldRig(t, lockTTL, timeout, lifetime)
	req := request("purged-lock-1", digestA)
	hold := r.proxy.HoldRequest(http.MethodPost, "/issues.json")
	firstDone := createAsync(r.first, req)
	caught(t, hold)
	key, err := ledger.LockKey("default", req.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.purge(key); err != nil {
		t.Fatal(err)
	}
	wantInDoubt(t, r, r.second, req, lifetime)
	hold.Release()
	first := <-firstDone
	if first.err != nil || first.res.Outcome != taskservice.Created {
		t.Fatalf("the first create, its POST released: %+v, %v; want created", first.res, first.err)
	}
	res := mustCreate(t, r.second, req, taskservice.Replayed)
	if got := issuesOf(t, r.s, "default", req.IntentID); len(got) != 1 || res.TaskID != first.res.TaskID {
		t.Fatalf("issues %+v, replayed %s, created %s: want one issue", got, res.TaskID, first.res.TaskID)
	}
}

// A POST the proxy never delivers leaves its key in doubt for the request
// lifetime; once it has passed, a create goes ahead: one issue.
func TestAPostThatNeverLandedIsMadeOnceItsLifetimeHasPassed(t *testing.T) {
	const lockTTL, timeout, lifetime = 2 * time.Second, time.Second, 3 * time.Second
	r := startHeldRig(t, lockTTL, timeout, lifetime)
	req := request("never-landed-1", digestA)
	hold := r.proxy.HoldRequest(http.MethodPost, "/issues.json") // never released: dropped when the proxy closes
	if _, err := r.first.Create(context.Background(), req); err == nil || taskservice.IsPermanent(err) {
		t.Fatalf("the first create, its POST never delivered: %v; want a transient error", err)
	}
	caught(t, hold)
	until := wantInDoubt(t, r, r.second, req, lifetime)
	time.Sleep(time.Until(until))
	deadline := time.Now().Add(10 * time.Second) // the server removes the record a moment after its TTL
	for {
		res, err := r.second.Create(context.Background(), req)
		if _, ok := taskservice.InDoubtUntil(err); ok && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil || res.Outcome != taskservice.Created {
			t.Fatalf("a create after the request lifetime: %+v, %v; want created", res, err)
		}
		break
	}
	if got := issuesOf(t, r.s, "default", req.IntentID); len(got) != 1 {
		t.Fatalf("%d issues, want 1", len(got))
	}
}

// The lock (1 s TTL) is renewed while its POST is held for 3 s: another
// caller cannot take it meanwhile, and the create ends created.
func TestALockIsRenewedWhileItsPostIsInFlight(t *testing.T) {
	const lockTTL, timeout, lifetime = time.Second, 10 * time.Second, 10 * time.Second
	r := startHeldRig(t, lockTTL, timeout, lifetime)
	req := request("renewed-1", digestA)
	hold := r.proxy.HoldRequest(http.MethodPost, "/issues.json")
	firstDone := createAsync(r.first, req)
	caught(t, hold)
	ctx := context.Background()
	for range 3 {
		time.Sleep(lockTTL)
		if lk, err := r.l.Lock(ctx, "default", req.IntentID, time.Minute); !errors.Is(err, taskservice.ErrLocked) {
			if err == nil {
				_ = lk.Release(ctx)
			}
			t.Fatalf("another Lock while the POST is held past the lock's TTL: %v, want ErrLocked (the holder renews it)", err)
		}
	}
	hold.Release()
	if a := <-firstDone; a.err != nil || a.res.Outcome != taskservice.Created {
		t.Fatalf("the create: %+v, %v; want created", a.res, a.err)
	}
	if lk, err := r.l.Lock(ctx, "default", req.IntentID, time.Minute); err != nil {
		t.Fatalf("the lock after the create: %v, want it released", err)
	} else {
		_ = lk.Release(ctx)
	}
}
