package audit_test

import (
	"github.com/sendtwice/sendtwice/taskservice"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/probe"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// listedRun is the correct history of world.run against a task service that
// keeps no call log and no counters: the audit knows it by its listing of
// tasks (one per intent, named as the receipts name it), and the receipts
// carry no counts.
func listedRun(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.run(auditedAt.Add(-time.Hour))
	l := &audit.TaskListing{Name: "CalDAV collection http://dav.test/tasks/", StoreID: auditedStore,
		NoCallLog: "the CalDAV server keeps no call log"}
	for _, f := range w.in.Intents {
		l.Tasks = append(l.Tasks, audit.ListedTask{IntentID: f.IntentID, TaskID: f.TaskID, RequestDigest: f.RequestDigest, Where: "/tasks/" + f.IntentID + ".ics"})
	}
	l.Items = len(l.Tasks)
	w.in.Listing = l
	w.in.Service = audit.ServiceIdentity{StoreID: auditedStore, Name: l.Name}
	w.in.Requests, w.in.Creates, w.in.Tasks, w.in.Intents = nil, nil, nil, nil
	w.in.Counts = provider.Counts{}
	for _, rs := range w.in.Receipts {
		for _, r := range rs {
			r.Counts = nil
		}
	}
	return w
}

// rejectedInScope publishes a tampered approval in scope, which the gate
// rejects, and its rejected receipt: a key the pipeline carried, with no
// task.
func (w *world) rejectedInScope(scope string, at time.Time) uint64 {
	w.t.Helper()
	s, err := scenario.For{}.InScope(scope).Build()
	if err != nil {
		w.t.Fatal(err)
	}
	seq := w.publish(s.TamperedCases()[2].Envelope, at) // candidate-changed
	w.receipt(seq, 1, "rejected-"+scope, document.OutcomeRejected, nil, at.Add(time.Millisecond))
	return seq
}

// listTaskForRejectedKey builds a world whose listing holds a task titled
// title in scope, made by hand for the key of a message in scope that the
// gate rejected a minute before the audit.
func listTaskForRejectedKey(scope, title string) func(w *world) {
	return func(w *world) {
		seq := w.rejectedInScope(scope, auditedAt.Add(-time.Minute))
		intent := w.in.Messages[seq].IntentID
		w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: scope, IntentID: intent, TaskID: "by-hand", Title: title})
	}
}

func checkNotes(rep audit.Report, id string) string {
	return strings.Join(checkNamed(rep, id).Notes, "\n")
}

func TestVerifyAListedTaskService(t *testing.T) {
	cases := []struct {
		name  string
		build func(w *world)
		fail  []string
		says  string
		notes string // check 3's notes must contain it
		left  map[string]int
	}{
		{name: "a correct history passes, with the checks that need a call log not applicable"},
		{
			name: "a second task for one intent, under another name, fails naming the intent",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{IntentID: "intent-0001", TaskID: "by-hand", Where: "/tasks/by-hand.ics"})
			},
			fail: []string{"listed-one-task-per-key"}, says: `intent "intent-0001" in scope "default" has 2 tasks`,
		},
		{
			name: "a task added by hand with one intent's property and another intent's task id fails naming both",
			build: func(w *world) {
				other := w.in.Listing.Tasks[1]
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{IntentID: "intent-0001", TaskID: other.TaskID, Where: "/tasks/by-hand.ics"})
			},
			fail: []string{"listed-one-task-per-key"}, says: `is held by tasks of 2 keys: intent "intent-0001" in scope "default", intent "intent-0002" in scope "default"`,
		},
		{
			name: "a receipt naming a task other than the one the service holds fails",
			build: func(w *world) {
				w.in.Listing.Tasks[0].TaskID = "another-task"
			},
			fail: []string{"listed-one-task-per-key"}, says: `but CalDAV collection http://dav.test/tasks/ holds task another-task`,
		},
		{
			name: "a task no receipt names fails as made outside the pipeline",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{IntentID: "intent-outside", TaskID: "intent-outside"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "intent-outside" in scope "default": task intent-outside exists, but no created or replayed receipt names it`,
		},
		{
			name: "a task of executor probe is counted apart",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{IntentID: "probe-abc-1", TaskID: "probe-abc-1"})
			},
		},
		{
			name: "a task with an executor probe's intent id in another scope than the default fails as made outside the pipeline",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: "team-b", IntentID: "probe-abc-1", TaskID: "probe-abc-1"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "probe-abc-1" in scope "team-b": task probe-abc-1 exists, but no created or replayed receipt names it`,
		},
		{
			name: "a task with an executor probe's intent id in the default scope, for the key of a rejected message, fails as the pipeline's",
			build: func(w *world) {
				tampered := w.seed.TamperedCases()[2] // candidate-changed
				seq := w.publish(tampered.Envelope, auditedAt.Add(-time.Minute))
				id := w.in.Messages[seq]
				id.IntentID = "probe-abc-1"
				w.in.Messages[seq] = id
				w.receipt(seq, 1, "rejected-probe", document.OutcomeRejected, nil, auditedAt.Add(-time.Minute))
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{IntentID: "probe-abc-1", TaskID: "probe-abc-1"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "probe-abc-1" in scope "default": task probe-abc-1 exists, but no created or replayed receipt names it`,
		},
		{
			name: "a task the probe left in its scope, with no receipt, passes and is listed apart",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: probe.Scope, IntentID: "probe-abc-retry", TaskID: "sendtwice-probe--probe-abc-retry", Title: probe.TitlePrefix + "abc: retry"})
			},
			notes: `intent "probe-abc-retry" in scope "sendtwice-probe": task sendtwice-probe--probe-abc-retry left by the probe`,
			left:  map[string]int{probe.Scope: 1, audit.DemoScope: 0},
		},
		{
			name: "a task the demo left in its scope, with no receipt, passes and is listed apart",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0002", TaskID: "demo-task", Title: audit.DemoTitlePrefix + "Send the signed contract"})
			},
			notes: `task demo-task left by the demo`,
			left:  map[string]int{probe.Scope: 0, audit.DemoScope: 1},
		},
		{
			name: "a task in the demo's scope not titled as the demo's fails as made outside the pipeline",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0002", TaskID: "demo-task", Title: "Send the signed contract"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "demo-abc-intent-0002" in scope "sendtwice-demo": task demo-task exists, but no created or replayed receipt names it and no message of it was dead-lettered: it was made outside the pipeline (in the scope of the demo, but not titled "[sendtwice demo] " as its tasks are)`,
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name: "a task in the probe's scope not titled as the probe's fails as made outside the pipeline",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: probe.Scope, IntentID: "probe-abc-retry", TaskID: "t1", Title: "sendtwice probe abc: retry"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "probe-abc-retry" in scope "sendtwice-probe": task t1 exists, but no created or replayed receipt names it and no message of it was dead-lettered: it was made outside the pipeline (in the scope of the probe, but not titled "[sendtwice probe] " as its tasks are)`,
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name:  "a task titled as the demo's, in its scope, for the key of a message the gate rejected is audited as the pipeline's and fails",
			build: listTaskForRejectedKey(audit.DemoScope, audit.DemoTitlePrefix+"Send the signed contract"),
			fail:  []string{"listed-tasks-named"}, says: `in scope "sendtwice-demo": task by-hand exists, but no created or replayed receipt names it and no message of it was dead-lettered: it was made outside the pipeline (in the scope of the demo, but the audited pipeline carried this key: audited as the pipeline's)`,
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name:  "a task titled as the probe's, in its scope, for the key of a message the gate rejected is audited as the pipeline's and fails",
			build: listTaskForRejectedKey(probe.Scope, probe.TitlePrefix+"abc: retry"),
			fail:  []string{"listed-tasks-named"}, says: `(in the scope of the probe, but the audited pipeline carried this key: audited as the pipeline's)`,
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name: "a task titled as the demo's, for the key of a demo-scope message whose receipt says created, passes as the pipeline's",
			build: func(w *world) {
				seq := w.inScope(audit.DemoScope, auditedAt.Add(-time.Minute))
				w.handle(seq, 1, auditedAt.Add(-time.Minute))
				r := w.in.Receipts[seq][0]
				r.TaskID = ptr("demo-pipeline-task")
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: audit.DemoScope, IntentID: *r.IntentID, TaskID: *r.TaskID, Title: audit.DemoTitlePrefix + "Send the signed contract"})
				w.in.Listing.Items++
			},
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name: "two tasks for one key in the demo's scope still fail check 2",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks,
					audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0002", TaskID: "demo-task", Title: audit.DemoTitlePrefix + "one"},
					audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0002", TaskID: "demo-task-again", Where: "/tasks/by-hand.ics", Title: audit.DemoTitlePrefix + "two"})
			},
			fail: []string{"listed-one-task-per-key"}, says: `intent "demo-abc-intent-0002" in scope "sendtwice-demo" has 2 tasks`,
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 2},
		},
		{
			name: "two tasks for one key in the probe's scope still fail check 2",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks,
					audit.ListedTask{Scope: probe.Scope, IntentID: "probe-abc-retry", TaskID: "t1", Title: probe.TitlePrefix + "one"},
					audit.ListedTask{Scope: probe.Scope, IntentID: "probe-abc-retry", TaskID: "t2", Title: probe.TitlePrefix + "two"})
			},
			fail: []string{"listed-one-task-per-key"}, says: `intent "probe-abc-retry" in scope "sendtwice-probe" has 2 tasks`,
		},
		{
			name: "a task in another scope, with no receipt, still fails as made outside the pipeline",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: "sendtwice-demos", IntentID: "demo-abc-intent-0002", TaskID: "demo-task"})
			},
			fail: []string{"listed-tasks-named"}, says: `intent "demo-abc-intent-0002" in scope "sendtwice-demos": task demo-task exists, but no created or replayed receipt names it`,
		},
		{
			name: "a task deleted in the service since is noted, not a violation",
			build: func(w *world) {
				w.in.Listing.Tasks = w.in.Listing.Tasks[:1]
			},
			notes: `intent "intent-0002" in scope "default": its receipts name task fake-task-0002, which CalDAV collection http://dav.test/tasks/ no longer holds`,
		},
		{
			name: "an intent created again after its task was deleted fails",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), auditedAt.Add(-time.Minute))
				first := w.in.Receipts[1][0]
				r := *first
				r.ReceiptID, r.Delivery.StreamSeq = "receipt-again", seq
				w.in.Receipts[seq] = append(w.in.Receipts[seq], &r)
			},
			fail: []string{"listed-one-task-per-key"}, says: `intent "intent-0001" in scope "default" has created receipts from 2 deliveries`,
		},
		{
			name: "one intent id in two scopes, a task each, passes: two keys, not two tasks for one",
			build: func(w *world) {
				seq := w.inScope("team-b", auditedAt.Add(-time.Minute))
				r := *w.in.Receipts[1][0]
				r.ReceiptID, r.Delivery.StreamSeq, r.Scope, r.TaskID = "receipt-team-b", seq, "team-b", ptr("team-b-task")
				r.RequestID, r.ApprovalID = ptr(w.in.Messages[seq].RequestID), ptr(w.in.Messages[seq].ApprovalID)
				w.in.Receipts[seq] = []*document.Receipt{&r}
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: "team-b", IntentID: "intent-0001", TaskID: "team-b-task", Where: "/tasks/team-b.ics"})
				w.in.Listing.Items++
			},
		},
		{
			name: "a task planted for a key the pipeline created is named by check 16 and does not count as the key's second task",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: "default", IntentID: "intent-0001", TaskID: "planted",
					Where: "issue #7", Title: "Pay invoice 4711 to MALLORY LTD", Unproven: `made by user "mallory", not the adapter's user`})
				w.in.Listing.Items++
			},
			fail: []string{"listed-tasks-proven"}, says: `task planted at issue #7 in CalDAV collection http://dav.test/tasks/ claims intent "intent-0001" in scope "default" but is not the pipeline's: made by user "mallory", not the adapter's user`,
		},
		{
			name: "a task planted for a key no receipt names fails check 16 only: it stands for no key",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: "tenant-a", IntentID: "c-intent-3", TaskID: "tenant-a~~c-intent-3",
					Where: "/tasks/tenant-a~~c-intent-3.ics", Unproven: "no X-SENDTWICE-PROOF property"})
				w.in.Listing.Items++
			},
			fail: []string{"listed-tasks-proven"}, says: `claims intent "c-intent-3" in scope "tenant-a" but is not the pipeline's: no X-SENDTWICE-PROOF property`,
		},
		{
			name: "a task the demo left, made under its own key or none, is counted apart by check 16 and left by the demo in check 3",
			build: func(w *world) {
				w.in.Listing.Tasks = append(w.in.Listing.Tasks, audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0002", TaskID: "demo-task",
					Title: audit.DemoTitlePrefix + "Send the signed contract", Unproven: "no X-SENDTWICE-PROOF property"})
				w.in.Listing.Items++
			},
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 1},
		},
		{
			name: "a receipt naming another store fails check 11",
			build: func(w *world) {
				other := "caldav-ffffffffffffffff"
				w.in.Receipts[2][0].StoreID = &other
			},
			fail: []string{"one-store"}, says: "name store caldav-ffffffffffffffff, not the audited store " + auditedStore,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := listedRun(t)
			if tc.build != nil {
				tc.build(w)
			}
			rep := audit.Verify(w.in)
			expectFailing(t, rep, tc.fail)
			if tc.says != "" && !strings.Contains(violations(rep), tc.says) {
				t.Errorf("the violations do not say %q:\n%s", tc.says, violations(rep))
			}
			if tc.notes != "" && !strings.Contains(checkNotes(rep, "listed-tasks-named"), tc.notes) {
				t.Errorf("check 3's notes do not say %q:\n%s", tc.notes, checkNotes(rep, "listed-tasks-named"))
			}
			if tc.left != nil {
				if rep.Listing == nil || !maps.Equal(rep.Listing.Left, tc.left) {
					t.Errorf("the report's listing %+v, want left %v", rep.Listing, tc.left)
				}
				figures := checkNamed(rep, "listed-tasks-named").Figures
				for scope, n := range tc.left {
					m, _ := audit.MarkOf(scope)
					if !slices.Contains(figures, audit.Figure{Name: "of which left by " + m.By + " (scope " + scope + "; excluded)", Value: int64(n)}) {
						t.Errorf("check 3's figures %v do not count %d left by %s", figures, n, m.By)
					}
				}
			}
			if len(rep.Checks) != 16 {
				t.Fatalf("%d checks, want 16", len(rep.Checks))
			}
			for _, c := range rep.Checks {
				na := slices.Contains([]string{"requests-accounted", "first-records-unchanged", "calls-name-messages", "one-call-per-delivery", "content-as-approved"}, c.ID)
				if na != (c.NotApplicable != "") || na && (!c.OK || len(c.Figures) != 0) {
					t.Errorf("check %s: not applicable %q, ok %v, figures %v", c.ID, c.NotApplicable, c.OK, c.Figures)
				}
			}
			if rep.Service.Name != w.in.Listing.Name || rep.Service.StoreID != auditedStore {
				t.Errorf("the report names the service %+v", rep.Service)
			}
		})
	}
}

// Status reads no stream: a task is a tool's when it carries the tool's
// whole mark, scope and title.
func TestSummarizeCountsATaskAsAToolsOnlyWhenItCarriesItsScopeAndTitle(t *testing.T) {
	cases := []struct {
		name     string
		task     audit.ListedTask
		pipeline int
		left     map[string]int
	}{
		{
			name: "a task in the demo's scope titled as the demo's is left by the demo",
			task: audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0001", TaskID: "t", Title: audit.DemoTitlePrefix + "Send the signed contract"},
			left: map[string]int{probe.Scope: 0, audit.DemoScope: 1},
		},
		{
			name: "a task in the probe's scope titled as the probe's is left by the probe",
			task: audit.ListedTask{Scope: probe.Scope, IntentID: "probe-abc-retry", TaskID: "t", Title: probe.TitlePrefix + "abc: retry"},
			left: map[string]int{probe.Scope: 1, audit.DemoScope: 0},
		},
		{
			name:     "a task in the demo's scope not titled as the demo's is the pipeline's",
			task:     audit.ListedTask{Scope: audit.DemoScope, IntentID: "demo-abc-intent-0001", TaskID: "t", Title: "Send the signed contract"},
			pipeline: 1, left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
		{
			name:     "a task titled as the probe's in the demo's scope is the pipeline's",
			task:     audit.ListedTask{Scope: audit.DemoScope, IntentID: "probe-abc-retry", TaskID: "t", Title: probe.TitlePrefix + "abc: retry"},
			pipeline: 1, left: map[string]int{probe.Scope: 0, audit.DemoScope: 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := audit.Summarize(audit.TaskListing{Tasks: []audit.ListedTask{tc.task}, Items: 1})
			if s.Tasks != 1 || s.Pipeline != tc.pipeline || !maps.Equal(s.Left, tc.left) {
				t.Errorf("summary %+v, want pipeline %d, left %v", s, tc.pipeline, tc.left)
			}
		})
	}
}

// A task made before the deployment's mark key carries no proof: the
// intent ledger, which binds its key to its digest and task id, vouches for
// it until its first resend proves it; a task the ledger binds to another
// digest or task is still named.
func TestATaskMadeBeforeTheMarkKeyThatTheLedgerBindsIsNotNamedAsPlanted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		digest func(listed string) string
		fail   []string
	}{
		{"the ledger binds each task: every check holds", func(d string) string { return d }, nil},
		{"the ledger binds the keys to another digest: check 16 names the tasks", func(string) string { return forgedDigest }, []string{"ledger-entries-approved", "listed-tasks-proven"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := listedRun(t)
			w.in.Ledger = &audit.LedgerRead{}
			for i, lt := range w.in.Listing.Tasks {
				w.in.Ledger.Entries = append(w.in.Ledger.Entries, ledgerEntry(t, taskservice.DefaultScope, lt.IntentID, tc.digest(lt.RequestDigest), lt.TaskID, auditedAt.Add(-time.Hour)))
				w.in.Listing.Tasks[i].Unproven = "it carries no X-SENDTWICE-PROOF"
			}
			rep := audit.Verify(w.in)
			expectFailing(t, rep, tc.fail)
		})
	}
}
