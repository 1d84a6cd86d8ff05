package main

// verify against a real CalDAV collection: what it reports of the tasks the
// executors made, and of VTODOs stored beside them by another client, which
// carry no proof of the deployment's mark key.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// verifyCalDAV runs executor verify against the pipeline with the CalDAV
// collection at collectionURL, and returns its report and error.
func verifyCalDAV(t *testing.T, r *davRig, collectionURL string) (string, error) {
	t.Helper()
	out, errOut, err := runCLI(context.Background(), "verify", "--server", r.env.URL(), "--task-service", "caldav", "--caldav-url", collectionURL)
	return out + errOut, err
}

// violationLines keeps the lines of a report that say what failed.
func violationLines(report string) string {
	var keep []string
	for _, line := range strings.Split(report, "\n") {
		if strings.HasPrefix(line, "FAIL") || strings.Contains(line, "! ") || strings.HasPrefix(line, "verify:") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// handMadeTodo is a VTODO another client stores, with our intent property.
func handMadeTodo(uid, intent string) []byte {
	return []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//by hand//EN\r\nBEGIN:VTODO\r\nUID:" + uid +
		"\r\nDTSTAMP:20261201T000000Z\r\nSUMMARY:added by hand\r\n" + caldav.PropIntentID + ":" + intent + "\r\n" +
		caldav.PropRequestDigest + ":sha256:" + strings.Repeat("0", 64) + "\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
}

// expectOnlyUnproven fails unless report, verify's with its error err,
// fails listed-tasks-proven alone, naming the task uid at path as claiming
// intent in the default scope without being the pipeline's.
func expectOnlyUnproven(t *testing.T, what, report string, err error, uid, path, intent string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: verify passed:\n%s", what, report)
		return
	}
	expectLines(t, what, report, "FAIL 16. listed-tasks-proven:",
		"! task "+uid+" at "+path+" in CalDAV collection ",
		`claims intent "`+intent+`" in scope "default" but is not the pipeline's: it carries no `+caldav.PropProof)
	if n := strings.Count(report, "FAIL"); n != 1 {
		t.Errorf("%s: verify failed %d checks, want listed-tasks-proven alone:\n%s", what, n, violationLines(report))
	}
}

func TestCalDAVVerifyChecksTheCollection(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k)+" verify holds after a clean run and names the intent of a task added by hand as not the pipeline's", func(t *testing.T) {
			r := startServedDAVRig(t, k)
			for _, e := range [][]byte{s.Original.Envelope(), s.Original.Envelope(), s.Changed.Envelope(), s.NewIntent.Envelope(), s.TamperedCases()[0].Envelope} {
				r.send(t, e)
			}
			report, err := verifyCalDAV(t, r, r.srv.CollectionURL)
			t.Logf("%s: executor verify --task-service caldav after a clean run:\n%s", k, report)
			if err != nil {
				t.Fatalf("verify failed after a clean run: %v", err)
			}
			expectLines(t, "the report", report,
				"task service: store "+r.dav.StoreID()+", CalDAV collection "+r.srv.CollectionURL,
				"n/a  4.", "n/a  5.", "n/a  7.", "n/a  10.", "not applicable: the CalDAV server keeps no call log",
				"ok   2.", "ok   3.", "ok   11.", "ok   16.", "verify: all checks hold")

			// Another URL than the one the executors recorded is refused,
			// naming both (the audit's check 11 would find every receipt
			// naming another store).
			proxy := davtest.NewProxy(t, r.srv.BaseURL)
			report, err = verifyCalDAV(t, r, proxy.Rewrite(r.srv.CollectionURL))
			t.Logf("%s: verify through a proxy's URL: %v", k, err)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), proxy.Rewrite(r.srv.CollectionURL)) || !strings.Contains(err.Error(), r.srv.CollectionURL) {
				t.Errorf("verify through another URL: %v\n%s", err, report)
			}

			// A second VTODO for intent-0001, stored by another client: it
			// carries no proof, so verify names it as not the pipeline's
			// (check 16), and it stands for no key: intent-0001 still has
			// one task (check 2 holds).
			path := r.srv.ResourcePath("by-hand.ics")
			if code := r.srv.Put(path, handMadeTodo("by-hand", "intent-0001")); code != http.StatusCreated {
				t.Fatalf("PUT %s answered %d", path, code)
			}
			report, err = verifyCalDAV(t, r, r.srv.CollectionURL)
			t.Logf("%s: verify with a second VTODO for intent-0001:\n%s", k, violationLines(report))
			expectOnlyUnproven(t, "verify with a second VTODO for intent-0001", report, err, "by-hand", path, "intent-0001")
			if code := r.srv.Do(http.MethodDelete, path, nil); code/100 != 2 {
				t.Fatalf("DELETE %s answered %d", path, code)
			}

			// A VTODO with intent-0001's property and intent-0002's task id
			// (its UID), under another name.
			// CalDAV forbids two resources with one UID in a collection
			// (RFC 4791 §5.3.2.1, no-uid-conflict); a server that keeps to
			// it refuses the task.
			taken := r.taskID("intent-0002")
			code := r.srv.Put(path, handMadeTodo(taken, "intent-0001"))
			if r.srv.Stored("by-hand.ics") == nil {
				t.Logf("%s refuses a second resource with the UID %s (answer %d): such a task cannot be added", k, taken, code)
				if code/100 == 2 && code != http.StatusMultiStatus {
					t.Errorf("%s answered %d but did not store the resource", k, code)
				}
				return
			}
			// Stored, it carries no proof either: named by check 16, it
			// holds neither intent-0001's key nor intent-0002's task id.
			report, err = verifyCalDAV(t, r, r.srv.CollectionURL)
			t.Logf("%s: a VTODO with intent-0001's property and intent-0002's task id stored (answer %d); verify says:\n%s", k, code, violationLines(report))
			expectOnlyUnproven(t, "verify with intent-0002's task id under intent-0001", report, err, taken, path, "intent-0001")
		})
	}
}

// markedTodo is a VTODO with our properties in scope, stored by hand: it
// carries no proof of the executors' mark key.
func markedTodo(scope, intent, title string) []byte {
	return []byte("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//by hand//EN\r\nBEGIN:VTODO\r\nUID:" + scope + "-" + intent +
		"\r\nDTSTAMP:20261201T000000Z\r\nSUMMARY:" + title + "\r\n" + caldav.PropIntentID + ":" + intent + "\r\n" +
		caldav.PropScope + ":" + scope + "\r\n" +
		caldav.PropRequestDigest + ":sha256:" + strings.Repeat("0", 64) + "\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
}

// createUnderMarkKey makes the task of (scope, intent) titled title in r's
// collection, logged in as user, through an adapter holding the
// deployment's mark key: tagged and proven as the executors make tasks.
func createUnderMarkKey(t *testing.T, r *davRig, user, password, scope, intent, title string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key, err := ledger.MarkKey(ctx, r.env.JS, false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := caldav.New(caldav.Config{CollectionURL: r.srv.CollectionURL, Username: user, Password: password, MarkKey: key})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Create(ctx, taskservice.Request{Scope: scope, IntentID: intent, RequestDigest: "sha256:" + strings.Repeat("0", 64), Task: taskservice.Task{Title: title}})
	if err != nil || res.Outcome != taskservice.Created {
		t.Fatalf("creating the task of intent %s in scope %s: %+v, %v", intent, scope, res, err)
	}
}
