package caldav_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// calendar stands for a CalDAV server's collection here: a PUT with
// If-None-Match: * stores a resource under a new name and is refused (412)
// for a name it holds, and a GET reads a resource back. A real server
// (Radicale, Xandikos, Nextcloud) does that and more.
func calendar() *httptest.Server {
	var mu sync.Mutex
	resources := map[string][]byte{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch body, held := resources[r.URL.Path]; {
		case r.Method == http.MethodPut && held:
			w.WriteHeader(http.StatusPreconditionFailed)
		case r.Method == http.MethodPut:
			resources[r.URL.Path], _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodGet && held:
			w.Header().Set("Content-Type", "text/calendar")
			_, _ = w.Write(body)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
}

// The adapter makes one task (a VTODO) per intent id in a calendar
// collection: a resend of the same request finds it and creates nothing,
// and another request under the same intent id is a conflict.
func Example() {
	srv := calendar()
	defer srv.Close()

	tasks, err := caldav.New(caldav.Config{
		CollectionURL: srv.URL + "/alice/tasks/",
		// Username and Password log in with HTTP basic authentication.
	})
	if err != nil {
		panic(err)
	}
	// Against a real server, tasks.Check(ctx) first makes sure that the
	// URL is a calendar that accepts tasks and that the login is accepted.

	// A request for intent-0001 with the digest of its approved document.
	ask := func(digit, title string) taskservice.Request {
		return taskservice.Request{IntentID: "intent-0001", RequestID: "task-request-0001",
			RequestDigest: "sha256:" + strings.Repeat(digit, 64), Task: taskservice.Task{Title: title}}
	}
	sent, again, changed := ask("1", "Add the missing checks"), ask("1", "Add the missing checks"), ask("2", "Delete the checks")
	for _, r := range []taskservice.Request{sent, again, changed} {
		res, err := tasks.Create(context.Background(), r)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Outcome, res.TaskID)
	}
	// Output:
	// created intent-0001
	// replayed intent-0001
	// idempotency_conflict intent-0001
}
