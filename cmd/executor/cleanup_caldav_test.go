package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// ownTodo is a task of the collection's owner, made in a calendar app.
func ownTodo(uid, title string) []byte {
	return []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//a calendar app//EN\r\nBEGIN:VTODO\r\nUID:" + uid +
		"\r\nDTSTAMP:20261201T000000Z\r\nSUMMARY:" + title + "\r\nSTATUS:NEEDS-ACTION\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
}

// The probe and the demo, run as the README runs them against a user's
// collection, leave it as they found it: the collection's resources, in
// the server's storage and in a REPORT, are the same before and after.
// With --keep-tasks their tasks stay, in their own scopes and titled as
// theirs.
func TestTheProbeAndTheDemoLeaveTheCollectionAsTheyFoundIt(t *testing.T) {
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	if code := srv.Put(srv.ResourcePath("groceries.ics"), ownTodo("groceries", "buy milk")); code != http.StatusCreated {
		t.Fatalf("PUT the owner's task: %d", code)
	}
	dav, err := caldav.New(caldav.Config{CollectionURL: srv.CollectionURL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := dav.Tasks(ctx)
		if err != nil {
			t.Fatalf("listing the collection: %v", err)
		}
		return l.VTODOs
	}
	before, listedBefore := srv.StoredNames(), listed()
	probeArgs := []string{"--task-service", "caldav", "--caldav-url", srv.CollectionURL, "--concurrency", "4", "--yes"}
	demoArgs := []string{"--task-service", "caldav", "--caldav-url", srv.CollectionURL}

	t.Run("the probe deletes its tasks at the end and says so", func(t *testing.T) {
		out, errOut, err := runProbeCmd(t, probeArgs...)
		if err != nil {
			t.Fatalf("probe: %v\n%s%s", err, out, errOut)
		}
		t.Logf("executor probe --task-service caldav:\n%s%s", errOut, out)
		if !strings.Contains(out, "cleanup: deleted 4 tasks of this run; 0 tasks left") {
			t.Errorf("the probe does not say what it deleted:\n%s", out)
		}
		if !strings.Contains(errOut, "it deletes them at the end (--keep-tasks keeps them)") {
			t.Errorf("the plan does not say the tasks are deleted:\n%s", errOut)
		}
	})
	t.Run("the demo deletes its tasks at the end and says so", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errOut bytes.Buffer
		if err := runDemoCmd(ctx, &out, &errOut, demoArgs...); err != nil {
			t.Fatalf("demo: %v\n%s%s", err, out.String(), errOut.String())
		}
		t.Logf("executor demo --task-service caldav:\n%s", out.String())
		expectLines(t, "the demo", out.String(),
			"cleanup: deleted the run's 2 tasks; the service lists 1 task, as before the run",
			"A 0, B 0, C 0 (of all 1)")
		if strings.Contains(out.String(), "DIFFERS") {
			t.Errorf("a row differs:\n%s", out.String())
		}
	})
	t.Run("the collection holds what it held before", func(t *testing.T) {
		after, listedAfter := srv.StoredNames(), listed()
		t.Logf("resources before %v (%d listed), after %v (%d listed)", before, listedBefore, after, listedAfter)
		if !slices.Equal(before, after) || listedBefore != listedAfter {
			t.Errorf("resources before %v (%d listed), after %v (%d listed)", before, listedBefore, after, listedAfter)
		}
	})
	t.Run("with --keep-tasks the tasks stay, in their scopes and titled as theirs", func(t *testing.T) {
		if out, errOut, err := runProbeCmd(t, append(probeArgs, "--keep-tasks")...); err != nil || !strings.Contains(out, "cleanup: kept 4 tasks of this run (--keep-tasks)") {
			t.Errorf("probe --keep-tasks: %v\n%s%s", err, out, errOut)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errOut bytes.Buffer
		if err := runDemoCmd(ctx, &out, &errOut, append(demoArgs, "--keep-tasks")...); err != nil || !strings.Contains(out.String(), "cleanup: kept the run's 2 tasks (--keep-tasks)") {
			t.Errorf("demo --keep-tasks: %v\n%s%s", err, out.String(), errOut.String())
		}
		counts := map[string]int{}
		for _, name := range srv.StoredNames() {
			if slices.Contains(before, name) {
				continue
			}
			body := string(srv.Stored(name))
			switch {
			case strings.HasPrefix(name, probe.Scope+"~~") && strings.Contains(body, "SUMMARY:"+probe.TitlePrefix):
				counts["probe"]++
			case strings.HasPrefix(name, audit.DemoScope+"~~") && strings.Contains(body, "SUMMARY:"+audit.DemoTitlePrefix):
				counts["demo"]++
			default:
				t.Errorf("%s is neither the probe's nor the demo's:\n%s", name, body)
			}
		}
		if counts["probe"] != 4 || counts["demo"] != 2 {
			t.Errorf("kept %v, want 4 of the probe and 2 of the demo", counts)
		}
	})
}
