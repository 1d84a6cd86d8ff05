package redmine_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// oneProcess is a taskservice.Locker and taskservice.Doubts for an
// application that is the only caller of its Redmine project: one lock and
// one in-doubt record per key, in memory (a record dies with the process,
// and so does what it protects against). The executors keep theirs in
// their intent ledger on JetStream, shared by every instance.
type oneProcess struct {
	mu     sync.Mutex
	held   map[[2]string]bool
	doubts map[[2]string]taskservice.Doubt
}

func (l *oneProcess) Doubt(_ context.Context, scope, intentID string, lifetime time.Duration) (taskservice.Doubt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := [2]string{scope, intentID}
	if d, ok := l.doubts[key]; ok && time.Now().Before(d.Until) {
		return d, taskservice.ErrInDoubt
	}
	d := taskservice.Doubt{Started: time.Now(), Until: time.Now().Add(lifetime)}
	l.doubts[key] = d
	return d, nil
}

func (l *oneProcess) Doubted(_ context.Context, scope, intentID string) (taskservice.Doubt, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.doubts[[2]string{scope, intentID}]
	return d, ok && time.Now().Before(d.Until), nil
}

func (l *oneProcess) Settle(_ context.Context, scope, intentID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.doubts, [2]string{scope, intentID})
	return nil
}

func (l *oneProcess) Lock(_ context.Context, scope, intentID string, _ time.Duration) (taskservice.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := [2]string{scope, intentID}
	if l.held[key] {
		return nil, taskservice.ErrLocked
	}
	l.held[key] = true
	return heldLock{l, key}, nil
}

type heldLock struct {
	l   *oneProcess
	key [2]string
}

func (h heldLock) Held(context.Context) error { return nil }

func (h heldLock) Release(context.Context) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	delete(h.l.held, h.key)
	return nil
}

// The adapter creates one issue per intent id in a Redmine project: Check
// makes sure, creating nothing, that the key is accepted and the project
// has the custom field the issues are marked in; a resend of the same
// request finds its issue and creates nothing. (It needs a Redmine server:
// the example is compiled, not run.)
func Example() {
	issues, err := redmine.New(redmine.Config{
		URL:     "https://redmine.example.org/",
		APIKey:  os.Getenv("REDMINE_API_KEY"),
		Project: "ops",
		Locks:   &oneProcess{held: map[[2]string]bool{}, doubts: map[[2]string]taskservice.Doubt{}},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := issues.Check(ctx); err != nil {
		panic(err) // says what is missing, and how to make the field
	}
	req := taskservice.Request{
		IntentID:      "intent-0001",
		RequestDigest: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		RequestID:     "task-request-0001",
		Task:          taskservice.Task{Title: "Add the missing checks"},
	}
	for range 2 {
		res, err := issues.Create(ctx, req)
		if err != nil {
			panic(err) // taskservice.IsPermanent says whether a retry can help
		}
		fmt.Println(res.Outcome, "issue", res.TaskID) // created, then replayed, one issue
	}
}

// The mark an issue carries, and what a lookup asks Redmine for.
func ExampleMark() {
	digest := "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	mark := redmine.Mark("team-a", "minutes 12/1", digest)
	fmt.Println(mark)
	fmt.Printf("%q\n", redmine.MarkPrefix("team-a", "minutes 12/1"))
	scope, intent, _, ok := redmine.ParseMark(mark)
	fmt.Println(scope, intent, ok)
	fmt.Println(redmine.TaskID(42))
	// Output:
	// st1 team-a minutes+12%2F1 sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
	// "st1 team-a minutes+12%2F1 "
	// team-a minutes 12/1 true
	// 42
}
