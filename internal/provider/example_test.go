package provider_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/sendtwice/sendtwice/internal/provider"
)

// A store decides a repeated call by its intent id: the second call with
// the same intent id and content creates nothing and returns the first
// task id. A call whose task is not the one in its request document is
// refused, and recorded as a request received.
func ExampleStore_Create() {
	dir, err := os.MkdirTemp("", "provider-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	st, err := provider.Open(dir, provider.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	// The call and the task-request.v1 document its digest covers.
	req, err := provider.NewRequest("intent-example", provider.Task{Title: "Add the missing check items"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		resp, err := st.Create(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.Outcome, resp.TaskID)
	}
	forged := req
	forged.Task.Title = "Something else"
	_, err = st.Create(context.Background(), forged)
	if re, ok := errors.AsType[*provider.RefusedError](err); ok {
		fmt.Println("refused:", re.Check, re.Field)
	}
	c := st.Stats()
	fmt.Printf("requests received %d, creates executed %d, tasks existing %d\n",
		c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
	// Output:
	// created fake-task-0001
	// replayed fake-task-0001
	// refused: request_binding task.title
	// requests received 3, creates executed 1, tasks existing 1
}
