package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/embedded"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/internal/linearize"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
)

// originalIntent is the intent id of the seed scenario's original approval.
const originalIntent = "intent-0001"

// wrongTaskOnReplay is an injected bug: the service's replays name another
// task than the first.
func wrongTaskOnReplay(svc taskservice.Service) taskservice.Service {
	return taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		res, err := svc.Create(ctx, req)
		if err == nil && res.Outcome == taskservice.Replayed {
			res.TaskID += "-wrong"
		}
		return res, err
	})
}

// TestTheLinearizabilityCheckFailsAndNamesTheIntentWhenTheServiceBreaksTheContract
// runs the real pipeline (embedded NATS, the task service over Pebble, an
// executor) with every call recorded at the contract, sends the seed
// approval twice and a second intent once, and checks the history.
func TestTheLinearizabilityCheckFailsAndNamesTheIntentWhenTheServiceBreaksTheContract(t *testing.T) {
	tests := []struct {
		name   string
		unsafe bool
		bug    func(taskservice.Service) taskservice.Service
		ok     bool
	}{
		{name: "the fake service as it is passes", ok: true},
		{name: "a service that creates on every call fails naming the intent", unsafe: true},
		{name: "a service that replays with a wrong task id fails naming the intent", bug: wrongTaskOnReplay},
	}
	s := testenv.Seed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.StartWith(t, embedded.StackOptions{UnsafeCreateEveryCall: tt.unsafe})
			path := filepath.Join(t.TempDir(), "calls-exec-1.jsonl")
			rec, err := history.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rec.Close() })
			var svc taskservice.Service = env.Service.TaskService()
			if tt.bug != nil {
				svc = tt.bug(svc)
			}
			env.Executor(executor.Config{ID: "exec-1", TaskService: rec.Wrap(svc)})
			for _, e := range [][]byte{s.Original.Envelope(), s.Original.Envelope(), s.NewIntent.Envelope()} {
				if _, err := demo.SendAndWait(context.Background(), env.JS, e, 30*time.Second); err != nil {
					t.Fatalf("sending: %v", err)
				}
			}
			if err := rec.Err(); err != nil {
				t.Fatal(err)
			}
			html := filepath.Join(t.ArtifactDir(), "linearizability.html")
			res, err := linearize.CheckFiles(linearize.Options{Visualization: html}, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if res.Operations != 3 || res.Intents != 2 {
				t.Fatalf("%d operations on %d intents recorded, want 3 on 2", res.Operations, res.Intents)
			}
			if tt.ok {
				if !res.OK {
					t.Fatalf("the check failed: %s", res)
				}
				return
			}
			if res.OK {
				t.Fatal("the check passed a service that breaks the contract")
			}
			if len(res.Violations) != 1 || strings.Join(res.Violations[0].Intents, ",") != originalIntent ||
				!strings.Contains(res.String(), `intent "`+originalIntent+`"`) {
				t.Fatalf("violations %v, want one naming %s", res.Violations, originalIntent)
			}
			b, err := os.ReadFile(html)
			if err != nil || !strings.Contains(string(b), originalIntent) {
				t.Fatalf("the visualisation %s does not name the intent (err %v)", html, err)
			}
		})
	}
}

// TestTheChaosRunsCheckLeavesAVisualisationNamedAfterTheIntent feeds the
// chaos test's check records of a service that creates on every call.
func TestTheChaosRunsCheckLeavesAVisualisationNamedAfterTheIntent(t *testing.T) {
	callsDir, artifacts := t.TempDir(), t.TempDir()
	tasks := 0
	createsEveryCall := taskservice.Func(func(ctx context.Context, req taskservice.Request) (taskservice.Result, error) {
		tasks++
		return taskservice.Result{Outcome: taskservice.Created, TaskID: fmt.Sprintf("task-%d", tasks)}, nil
	})
	for p, intents := range [][]string{{"intent-a", "intent-b"}, {"intent-b"}} {
		rec, err := history.Open(filepath.Join(callsDir, fmt.Sprintf("exec-%d-001.jsonl", p+1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range intents {
			req := taskservice.Request{IntentID: id, RequestDigest: "sha256:" + strings.Repeat("1", 64), CallRef: "APPROVALS:1:1:1"}
			if _, err := rec.Wrap(createsEveryCall).Create(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := checkCallRecords(callsDir, artifacts)
	if err != nil {
		t.Fatal(err)
	}
	if v.res.OK || v.files != 2 || v.sessions != 2 || !strings.Contains(v.res.String(), `intent "intent-b"`) {
		t.Fatalf("files %d, sessions %d: %s", v.files, v.sessions, v.res)
	}
	if want := filepath.Join(artifacts, "linearizability-intent-b.html"); v.html != want {
		t.Fatalf("visualisation %q, want %q", v.html, want)
	}
	if _, err := os.Stat(v.html); err != nil {
		t.Fatal(err)
	}
}
