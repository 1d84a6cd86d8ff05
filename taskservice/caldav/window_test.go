package caldav_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// dropPUTReply lets the server answer a PUT and then loses the answer, as
// a broken connection would, while armed.
type dropPUTReply struct {
	armed atomic.Bool
}

func (d *dropPUTReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut || !d.armed.CompareAndSwap(true, false) {
		return resp, err
	}
	resp.Body.Close()
	return nil, errors.New("the reply was lost on purpose after the server answered")
}

// deliver calls svc as the executor's deliveries would: a transient
// failure (a lost reply; a resource deleted between the PUT's 412 and the
// GET that reads it back) is delivered again a little later, a few times.
func deliver(ctx context.Context, svc taskservice.Service, req taskservice.Request) (taskservice.Result, error) {
	var (
		res taskservice.Result
		err error
	)
	for range 5 {
		if res, err = svc.Create(ctx, req); err == nil || taskservice.IsPermanent(err) {
			return res, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return res, err
}

// The remaining window of the intent ledger, measured: the owner deletes
// the task at a random moment while an executor creates it, the first
// reply is lost in half of the trials (so the ledger is not written by
// that call), the lost call is retried as a redelivery would, and a late
// resend follows. A task is created again only when the owner's delete
// fell between the server's 201 and a ledger write that had not happened
// yet; the test logs how often that was, and checks that it happens only
// in trials whose first reply was lost and never leaves two tasks.
func TestTheLedgersRemainingWindow(t *testing.T) {
	const trials = 16
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" a task is created again only when its owner deleted it before the ledger knew it", func(t *testing.T) {
			davtest.Require(t, k)
			t.Parallel()
			s := davtest.Start(t, k, davtest.Options{})
			drop := &dropPUTReply{}
			a := adapter(t, s.CollectionURL, caldav.Config{HTTPClient: &http.Client{Transport: drop, Timeout: 10 * time.Second}})
			owner := adapter(t, s.CollectionURL, caldav.Config{})
			kept, err := taskservice.KeepDeletedKeys(a, startLedger(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rnd := rand.New(rand.NewPCG(23, 3))
			var (
				lostTrials, deletedTrials, deletedBefore, replayedDeleted, createdAgain, createdAgainLost int
			)
			for i := range trials {
				req := request(fmt.Sprintf("intent-window-%02d", i), "deleted while it is made")
				req.NotAfter = time.Now().Add(time.Hour)
				lost := rnd.IntN(2) == 0
				if lost {
					lostTrials++
				}
				drop.armed.Store(lost)
				delay := time.Duration(rnd.IntN(40)) * time.Millisecond
				var (
					wg     sync.WaitGroup
					delErr error
				)
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(delay)
					delErr = owner.Delete(ctx, req.IntentID)
				}()
				var outcomes []taskservice.Outcome
				res, err := deliver(ctx, kept, req)
				if err != nil {
					t.Fatalf("trial %d: %v", i, err)
				}
				outcomes = append(outcomes, res.Outcome)
				wg.Wait()
				late, err := deliver(ctx, kept, req)
				if err != nil {
					t.Fatalf("trial %d, the late resend: %v", i, err)
				}
				outcomes = append(outcomes, late.Outcome)
				name, _ := caldav.ResourceName(req.IntentID)
				creates := s.Creates(s.ResourcePath(name))
				switch {
				case errors.Is(delErr, caldav.ErrNoTask):
					deletedBefore++ // nothing was there to delete yet
				case delErr != nil:
					t.Fatalf("trial %d: the owner's delete: %v", i, delErr)
				default:
					deletedTrials++
				}
				switch {
				case creates > 2:
					t.Errorf("trial %d: %d creates (201) of one intent", i, creates)
				case creates == 2:
					createdAgain++
					if lost {
						createdAgainLost++
					}
				case late.TaskDeleted:
					replayedDeleted++
				}
				t.Logf("trial %d: reply lost %v, owner's delete after %s: %v; answers %v, late resend marked deleted %v; %d creates (201)",
					i, lost, delay, delErr, outcomes, late.TaskDeleted, creates)
			}
			t.Logf("%s: %d trials, %d with the first reply lost; the owner deleted the task in %d (in %d it was not made yet); "+
				"replayed as deleted %d; created again %d (%d of them after a lost reply): the remaining window",
				k, trials, lostTrials, deletedTrials, deletedBefore, replayedDeleted, createdAgain, createdAgainLost)
			if createdAgain != createdAgainLost {
				t.Errorf("%d tasks were created again in trials whose reply was not lost: the ledger is written after every answer, so only a lost reply leaves the window open", createdAgain-createdAgainLost)
			}
			l := listing(t, a)
			perIntent := map[string]int{}
			for _, ti := range l.Tasks {
				perIntent[ti.IntentID]++
				if perIntent[ti.IntentID] > 1 {
					t.Errorf("intent %s has two tasks at once", ti.IntentID)
				}
			}
		})
	}
}
