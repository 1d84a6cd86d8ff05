package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// The demo against a real CalDAV server, told twice against one collection
// and keeping its tasks (--keep-tasks):
// each run's table is all ok, and the server's own log and storage agree
// with it: for A one PUT, answered 201 (the replay, the conflict and the
// resend after its owner deleted the task are answered from the intent
// ledger, which knows the key, with a read of the resource and no PUT), for
// C one 201 among two PUTs (the answer lost before the ledger knew the key,
// then the redelivery), one .ics file for B and for C, none for A.
func TestDemoAgainstACalDAVServer(t *testing.T) {
	s := davtest.Start(t, davtest.Xandikos, davtest.Options{})
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	intentRE := regexp.MustCompile(`(?m)^intent ([ABC]): (\S+)$`)
	var all, deleted []string
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out, errOut bytes.Buffer
		err := runDemoCmd(ctx, &out, &errOut, "--task-service", "caldav", "--caldav-url", s.CollectionURL, "--keep-tasks")
		cancel()
		if err != nil {
			t.Fatalf("run %d: demo failed: %v\n%s\n%s", run, err, out.String(), errOut.String())
		}
		table := out.String()
		if strings.Contains(table, "DIFFERS") {
			t.Errorf("run %d: a row differs:\n%s", run, table)
		}
		m := intentRE.FindAllStringSubmatch(table, -1)
		if len(m) != 3 {
			t.Fatalf("run %d: the demo names %d intents, want A, B and C:\n%s", run, len(m), table)
		}
		intents := map[string]string{}
		for _, x := range m {
			intents[x[1]] = x[2]
		}
		task := func(letter string) string { return caldav.TaskID(demo.Scope, intents[letter]) }
		for _, want := range []string{
			"task service: CalDAV collection " + s.CollectionURL,
			"created " + task("A"), "replayed " + task("A"), "idempotency_conflict " + task("A"),
			"A 1, its digest unchanged", "created " + task("B"), "rejected at",
			"replayed " + task("A") + " (task deleted)", "A 0, B 1",
			"replayed " + task("C"), "A 0, B 1, C 1", "Where the figures come from",
		} {
			if !strings.Contains(table, want) {
				t.Errorf("run %d: the table lacks %q:\n%s", run, want, table)
			}
		}
		// The server's own log: requests received and creates executed.
		for _, tc := range []struct {
			letter        string
			puts, creates int
		}{{"A", 1, 1}, {"B", 1, 1}, {"C", 2, 1}} {
			name, err := caldav.ScopedResourceName(demo.Scope, intents[tc.letter])
			if err != nil {
				t.Fatal(err)
			}
			if tc.letter == "A" {
				deleted = append(deleted, name)
			} else {
				all = append(all, name)
			}
			path := s.ResourcePath(name)
			if p, c := s.PUTs(path), s.Creates(path); p != tc.puts || c != tc.creates {
				t.Errorf("run %d: the server's log shows %d PUTs and %d creates (201) for %s (%s), want %d and %d",
					run, p, c, tc.letter, path, tc.puts, tc.creates)
			}
		}
	}
	// The server's storage: one file for B and for C of both runs, none
	// for A, whose task its owner deleted.
	if got := strings.Join(s.StoredNames(), " "); len(s.StoredNames()) != len(all) {
		t.Errorf("the collection's folder holds %s, want the %d intents B and C of two runs", got, len(all))
	}
	for _, name := range all {
		if s.Stored(name) == nil {
			t.Errorf("the collection's folder lacks %s", name)
		}
	}
	for _, name := range deleted {
		if s.Stored(name) != nil {
			t.Errorf("the collection's folder holds %s, whose task its owner deleted", name)
		}
	}
}

func TestDemoRefusesCalDAVFlagsWithTheFakeService(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runDemoCmd(context.Background(), &out, &errOut, "--caldav-url", "http://127.0.0.1:1/x/")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "need --task-service caldav") {
		t.Errorf("demo --caldav-url without --task-service caldav ended with %v (exit %d), want a usage error", err, exitCode(err))
	}
}

func runDemoCmd(ctx context.Context, stdout, stderr *bytes.Buffer, args ...string) error {
	return run(ctx, append([]string{"demo"}, args...), stdout, stderr)
}
