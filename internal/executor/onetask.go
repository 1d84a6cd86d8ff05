package executor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/taskservice"
)

// OneTaskLockPoll is how often a create that finds its key's lock held
// tries again (OneTaskPerKey): after OneTaskLockPoll plus up to as much
// again at random, so that waiters do not poll in step.
const OneTaskLockPoll = 100 * time.Millisecond

// oneTaskReleaseTimeout bounds a lock's release, which runs even when the
// call's context has ended.
const oneTaskReleaseTimeout = 5 * time.Second

// OneTaskPerKey returns a service that keeps one task per key (scope,
// intent id) across all of r's destinations. Inside one destination its
// service decides a create atomically (a CalDAV PUT with If-None-Match: *),
// but two destinations are two stores: a request for the key in one and a
// request for it in another would each create a task. So, when r serves
// more than one destination, a create for a key in destination D:
//
//   - looks the key up in D, without a lock: a task there is answered as D
//     answers (the redelivery of a create whose reply was lost replays at
//     once);
//   - takes the key's lock in locks (the intent ledger), for ttl, waiting
//     and polling (OneTaskLockPoll) while another caller holds it
//     (when ctx ends first, the error is transient);
//   - looks the key up in every other destination: found → Conflict (or
//     Replayed, for the same request digest) with that task's id and a
//     Reason naming its destination, and nothing is created;
//   - checks that the lock is still held (Lock.Held) and creates in D;
//   - releases the lock, except after a transient failure of the create,
//     which may still land: the lock is then kept until its TTL, so that
//     no caller looks the key up elsewhere and creates meanwhile.
//
// Every service of r must be a taskservice.Finder. With one destination
// there is nothing to keep apart: r itself is returned and no lock is
// taken. The returned service offers r's Find and RemembersDeletedKeys, so
// that taskservice.KeepDeletedKeys can wrap it with the intent ledger. ttl
// must outlive a call (lookups and a create); the commands take twice the
// call timeout plus 10 s, as for Redmine.
func (r *Router) OneTaskPerKey(locks taskservice.Locker, ttl time.Duration) (taskservice.Service, error) {
	if len(r.routes) < 2 {
		return r, nil
	}
	if locks == nil {
		return nil, errors.New("executor: one task per key across destinations needs a locker (the intent ledger)")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("executor: one task per key across destinations: the lock TTL %v is not positive", ttl)
	}
	for _, rt := range r.routes {
		if _, ok := rt.Service.(taskservice.Finder); !ok {
			return nil, fmt.Errorf("executor: destination %s offers no lookup, so a key cannot be kept to one task across destinations", rt.Destination)
		}
	}
	return &oneTask{r: r, locks: locks, ttl: ttl}, nil
}

type oneTask struct {
	r     *Router
	locks taskservice.Locker
	ttl   time.Duration
}

// Find is the router's: the key's task in the call's destination.
func (o *oneTask) Find(ctx context.Context, req taskservice.Request) (taskservice.Result, bool, error) {
	return o.r.Find(ctx, req)
}

// RemembersDeletedKeys is the router's.
func (o *oneTask) RemembersDeletedKeys() bool { return o.r.RemembersDeletedKeys() }

// Serves is the router's.
func (o *oneTask) Serves() []gate.Destination { return o.r.Serves() }

func (o *oneTask) Create(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
	own, err := o.r.lookup(req)
	if err != nil {
		return taskservice.Result{}, err
	}
	res, found, err := own.Service.(taskservice.Finder).Find(ctx, req)
	if err != nil || found {
		return res, err
	}
	scope := req.KeyScope()
	lk, err := o.lock(ctx, scope, req.IntentID)
	if err != nil {
		return taskservice.Result{}, err
	}
	release := true
	defer func() {
		if release {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), oneTaskReleaseTimeout)
			defer cancel()
			_ = lk.Release(rctx) // an error leaves the lock to its TTL
		}
	}()
	for _, rt := range o.r.routes {
		if rt.Destination == own.Destination {
			continue
		}
		other := req
		other.Provider, other.Destination = rt.Provider, rt.Name
		res, found, err := rt.Service.(taskservice.Finder).Find(ctx, other)
		if err != nil {
			return taskservice.Result{}, fmt.Errorf("executor: looking intent %q of scope %q up in destination %s before creating it in %s: %w",
				req.IntentID, scope, rt.Destination, own.Destination, err)
		}
		if !found {
			continue
		}
		out := taskservice.Result{Outcome: res.Outcome, TaskID: res.TaskID, StoreID: res.StoreID, Counts: res.Counts}
		if out.Outcome != taskservice.Replayed {
			out.Outcome = taskservice.Conflict
			out.Reason = fmt.Sprintf("the key already has its task in destination %s (a key has one task across this executor's destinations); nothing was created in %s", rt.Destination, own.Destination)
			if res.Reason != "" {
				out.Reason += ": " + res.Reason
			}
		}
		return out, nil
	}
	if err := lk.Held(ctx); err != nil {
		// Another caller may hold the lock now: creating could duplicate.
		return taskservice.Result{}, taskservice.Transient(fmt.Errorf("executor: before creating intent %q of scope %q in %s: %w", req.IntentID, scope, own.Destination, err))
	}
	res, err = own.Service.Create(ctx, req)
	if err != nil && !taskservice.IsPermanent(err) {
		// The create may still land: keep the lock until its TTL.
		release = false
	}
	return res, err
}

// lock takes the key's lock, waiting for another holder to give it up.
func (o *oneTask) lock(ctx context.Context, scope, intentID string) (taskservice.Lock, error) {
	for {
		lk, err := o.locks.Lock(ctx, scope, intentID, o.ttl)
		if err == nil {
			return lk, nil
		}
		if !errors.Is(err, taskservice.ErrLocked) {
			return nil, taskservice.Transient(fmt.Errorf("executor: taking the lock of intent %q in scope %q: %w", intentID, scope, err))
		}
		timer := time.NewTimer(OneTaskLockPoll + rand.N(OneTaskLockPoll+1))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, taskservice.Transient(fmt.Errorf("executor: waiting for the lock of intent %q in scope %q until the call ended (%w): %w", intentID, scope, context.Cause(ctx), err))
		case <-timer.C:
		}
	}
}
