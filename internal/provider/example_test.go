package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sendtwice/sendtwice/internal/provider"
)

// A store decides a repeated call by its intent id: the second call with
// the same intent id and content creates nothing and returns the first
// task id.
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

	req := provider.CreateRequest{
		IntentID:      "intent-example",
		RequestDigest: "sha256:" + strings.Repeat("0f", 32),
		Task:          provider.Task{Title: "Add the missing check items"},
	}
	for range 2 {
		resp, err := st.Create(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.Outcome, resp.TaskID)
	}
	c := st.Stats()
	fmt.Printf("requests received %d, creates executed %d, tasks existing %d\n",
		c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
	// Output:
	// created fake-task-0001
	// replayed fake-task-0001
	// requests received 2, creates executed 1, tasks existing 1
}
