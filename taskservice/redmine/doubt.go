package redmine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
)

// doubtMargin lengthens a create's in-doubt record past the request
// lifetime: the record is written a moment before the create is sent (the
// lock's Held read comes between).
const doubtMargin = 2 * time.Second

// createInDoubt creates req's issue under lk, its key in doubt while the
// create's outcome is unknown: the in-doubt record is written first
// (create-only: a record found means another create may still land), then
// the lock is checked, then the POST is sent with the lock renewed, and the
// record is settled unless the outcome stays unknown.
func (a *Adapter) createInDoubt(ctx context.Context, t target, req taskservice.Request, issue newIssueBody, lk taskservice.Lock) (taskservice.Result, error) {
	scope, intent := req.KeyScope(), req.IntentID
	d, err := a.doubts.Doubt(ctx, scope, intent, a.lifetime+doubtMargin)
	if errors.Is(err, taskservice.ErrInDoubt) {
		return a.none(), a.doubtError(req, d)
	}
	if err != nil {
		return a.none(), taskservice.Transient(fmt.Errorf("redmine: writing the in-doubt record of intent %q in scope %q before its create: %w", intent, scope, err))
	}
	if err := lk.Held(ctx); err != nil {
		// Another caller may hold the lock now. Nothing is sent: the
		// record goes.
		a.settle(ctx, req)
		return a.none(), taskservice.Transient(fmt.Errorf("redmine: before creating the issue of intent %q in scope %q: %w", intent, scope, err))
	}
	stop := a.keepAlive(ctx, lk)
	id, ambiguous, err := a.post(ctx, t, req, issue)
	stop()
	if !ambiguous || neverSent(err) {
		a.settle(ctx, req)
	}
	if err != nil {
		return a.none(), err
	}
	return taskservice.Result{Outcome: taskservice.Created, TaskID: TaskID(id), StoreID: a.storeID}, nil
}

// neverSent reports whether err says the request never left: the
// connection to Redmine could not be made (refused, no route, a dial
// timeout), so nothing can land.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// doubtError says that req's key is in doubt until d.Until: marked
// taskservice.InDoubt. A record read after its Until by this clock is
// about to go: it is in doubt for another second.
func (a *Adapter) doubtError(req taskservice.Request, d taskservice.Doubt) error {
	until := d.Until
	if now := time.Now(); !until.After(now) {
		until = now.Add(time.Second)
	}
	return taskservice.InDoubt(fmt.Errorf("redmine: intent %q in scope %q is in doubt: a create sent at %s may still land until %s and no issue carries the key yet, so none is created before then",
		req.IntentID, req.KeyScope(), d.Started.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)), until)
}

// settle removes req's in-doubt record, even when ctx has ended; an error
// leaves the record to its TTL (a lookup that finds the issue settles it
// again).
func (a *Adapter) settle(ctx context.Context, req taskservice.Request) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = a.doubts.Settle(sctx, req.KeyScope(), req.IntentID)
}

// keepAlive renews lk (when it is a taskservice.Renewer) every third of
// the lock's TTL until stop is called, or until a renewal finds it lost
// (the in-doubt record still protects the key then).
func (a *Adapter) keepAlive(ctx context.Context, lk taskservice.Lock) (stop func()) {
	r, ok := lk.(taskservice.Renewer)
	if !ok {
		return func() {}
	}
	every := max(a.lockTTL/3, 10*time.Millisecond)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				rctx, cancel := context.WithTimeout(ctx, every)
				err := r.Renew(rctx)
				cancel()
				if errors.Is(err, taskservice.ErrLockLost) {
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
