package send_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/send"
)

// A service that holds the three documents checks them, sends them, and
// sends them again after (say) a timeout: the second receipt says replayed,
// with the same task, and the task service created one task. A request
// edited after its approval is refused locally and never published.
func Example() {
	url, stop := startPipeline()
	defer stop()

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "seed", name))
		if err != nil {
			panic(err)
		}
		return b
	}
	docs := send.Documents{Candidate: read("candidate.json"), Request: read("request.json"), Approval: read("approval.json")}

	// Without the executors' trusted approvers, the checks that need no keys.
	v, err := send.Bindings().Documents(docs)
	if err != nil {
		panic(err)
	}
	fmt.Printf("local check: pass, intent %s (not checked: %v)\n", v.IntentID, v.NotChecked)

	edited := docs
	edited.Request = read("request-changed.json")
	_, err = send.Bindings().Documents(edited)
	var refused *send.Refusal
	if errors.As(err, &refused) {
		fmt.Printf("edited request: refused at %s (%s); nothing published\n", refused.Check, refused.Path)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	client := send.NewClient(js)
	env, err := send.Build(docs)
	if err != nil {
		panic(err)
	}
	for _, attempt := range []string{"first send", "second send"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, r, err := client.Send(ctx, env)
		cancel()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s %s; requests received %d, creates executed %d, tasks existing %d\n", attempt, r.Outcome, r.TaskID,
			r.Counts.RequestsReceived, r.Counts.CreatesExecuted, r.Counts.TasksExisting)
	}

	// Output:
	// local check: pass, intent intent-0001 (not checked: [signature expiry scope])
	// edited request: refused at request_binding ($.approval.request.request_id); nothing published
	// first send: created fake-task-0001; requests received 1, creates executed 1, tasks existing 1
	// second send: replayed fake-task-0001; requests received 2, creates executed 1, tasks existing 1
}

// startPipeline starts what a deployment runs, in this process: a NATS
// server with JetStream, the fake task service and one executor that
// accepts unsigned approvals (the seed approval is unsigned).
func startPipeline() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "send-example-")
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := embedded.StartStack(embedded.StackOptions{Dir: dir, Host: "127.0.0.1", Port: -1, Logger: quiet})
	if err != nil {
		panic(err)
	}
	nc, err := nats.Connect(st.URL())
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(nc, executor.Config{ID: "exec-1", Logger: quiet, TaskService: provider.NewClient(nc).TaskService(),
		Gate: &gate.Checker{AllowUnsigned: true}})
	if err != nil {
		panic(err)
	}
	stopEx, err := ex.Start(context.Background())
	if err != nil {
		panic(err)
	}
	return st.URL(), func() {
		_ = stopEx()
		nc.Close()
		_ = st.Close()
		_ = os.RemoveAll(dir)
	}
}
