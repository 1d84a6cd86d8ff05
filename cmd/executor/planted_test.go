package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// TestCalDAVACalendarUserWhoPlantsTheFutureTaskGetsNothing is attack 1 of
// the second round, black-box: another user of the calendar stores, before
// the approval runs, a task at the name intent-0001's task had before mark
// keys, with the UID it had, the X-SENDTWICE marks and the approved digest
// copied, titled to pay another company. The real approval then creates its
// own task under its tagged name (created, not replayed with the plant), and
// verify names the planted one, where it is and why.
func TestCalDAVACalendarUserWhoPlantsTheFutureTaskGetsNothing(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	digest, err := canon.Digest(s.Original.Request)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range davtest.Kinds() {
		t.Run("on "+string(k), func(t *testing.T) {
			r := startServedDAVRig(t, k)
			name, err := caldav.ResourceName("intent-0001")
			if err != nil {
				t.Fatal(err)
			}
			path := r.srv.ResourcePath(name)
			plant := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//another client//EN\r\nBEGIN:VTODO\r\nUID:intent-0001\r\n" +
				"DTSTAMP:20261201T000000Z\r\nSUMMARY:Pay invoice 4711 to MALLORY LTD\r\n" + caldav.PropIntentID + ":intent-0001\r\n" +
				caldav.PropScope + ":default\r\n" + caldav.PropRequestDigest + ":" + digest + "\r\nEND:VTODO\r\nEND:VCALENDAR\r\n"
			if code := r.srv.Put(path, []byte(plant)); code/100 != 2 {
				t.Fatalf("planting %s answered %d", path, code)
			}

			real := r.send(t, s.Original.Envelope())
			checkServiceReceipt(t, "the real approval after the plant", real.Receipt, document.OutcomeCreated, r.taskID("intent-0001"), r.dav.StoreID())
			if n := tasksFor(r.listing(t), "intent-0001"); n != 2 {
				t.Errorf("the collection lists %d tasks of intent-0001, want the plant and the real one", n)
			}
			report, err := verifyCalDAV(t, r, r.srv.CollectionURL)
			t.Logf("%s: verify after the plant:\n%s", k, violationLines(report))
			expectOnlyUnproven(t, "verify after the plant", report, err, "intent-0001", path, "intent-0001")
		})
	}
}

// TestRedmineAReporterWhoPlantsTheFutureIssueGetsNothing is attack 2 of
// the second round, black-box: a Reporter of the project creates, before
// the approval runs, an issue whose mark holds intent-0001's key and its
// approved digest, titled to pay another company. The real approval then
// creates its own issue (created, not replayed with the planted one), and
// verify names the planted issue, where it is and who made it.
func TestRedmineAReporterWhoPlantsTheFutureIssueGetsNothing(t *testing.T) {
	t.Parallel() // each has its own Redmine and NATS; most of its time is spent waiting
	s := testenv.SeedFor(t, scenario.Redmine)
	r := startRedmineRig(t)
	digest, err := canon.Digest(s.Original.Request)
	if err != nil {
		t.Fatal(err)
	}
	mallory := r.srv.AddUser(t, "mallory", "Reporter")
	for _, mark := range []string{
		redmine.Mark(document.DefaultScope, "intent-0001", digest),
		redmine.TaggedMarkVersion + " " + document.DefaultScope + " intent-0001 " + digest + " " + strings.Repeat("0", 32),
	} {
		r.srv.CreateIssueAs(t, mallory, "Pay invoice 4711 to MALLORY LTD", mark)
	}
	r.executor(t, r.srv.URL, "exec-1", patient...)

	real := sendAndWait(t, r.env, s.Original.Envelope())
	checkServiceReceipt(t, "the real approval after the plants", real.Receipt, document.OutcomeCreated, "", r.store())
	ids := r.issues(t).byIntent["intent-0001"]
	t.Logf("the real approval: %s %s, note %q; issues carrying intent-0001's key: %v", real.Outcome, ptr(real.TaskID), real.Note, ids)
	if len(ids) != 3 || ptr(real.TaskID) != redmine.TaskID(ids[2]) {
		t.Fatalf("issues %v carry intent-0001's key, want the two planted ones and the real one, last (the receipt names %s)", ids, ptr(real.TaskID))
	}
	for _, id := range ids[:2] {
		if !strings.Contains(real.Note, fmt.Sprintf("issue #%d", id)) || !strings.Contains(real.Note, "mallory") {
			t.Errorf("the receipt's note %q does not name planted issue #%d and its author", real.Note, id)
		}
	}

	report, err := verifyRedmine(t, r)
	t.Logf("verify after the plants:\n%s", violationLines(report))
	if err == nil {
		t.Fatalf("verify passed with two planted issues:\n%s", report)
	}
	for _, id := range ids[:2] {
		expectLines(t, "verify's report", report, "FAIL 16. listed-tasks-proven:",
			fmt.Sprintf(`task %d at issue #%d in Redmine project %s at %s/ claims intent "intent-0001" in scope "default" but is not the pipeline's:`, id, id, r.srv.Project, r.srv.URL))
	}
	if strings.Count(report, "FAIL") != 1 {
		t.Errorf("verify failed other checks than listed-tasks-proven:\n%s", violationLines(report))
	}
}
