package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// TestVerifyComparesEachTaskWithItsApprovedRequest changes the content of
// the tasks a correct history left in the service's records, as a store
// written before the service checked requests (or a service that does not)
// would hold them, and expects check 12 to name the intent and the field.
func TestVerifyComparesEachTaskWithItsApprovedRequest(t *testing.T) {
	hourAgo := auditedAt.Add(-time.Hour)
	cases := []struct {
		name string
		// change breaks the correct history of w.run(hourAgo); build, when
		// set, makes the history instead.
		change, build func(w *world)
		opts          audit.Options
		// says lists what content-as-approved's violations must say; none
		// means the history must pass.
		says []string
	}{
		{name: "a correct history passes, every task compared"},
		{name: "a task whose title is not the approved one fails check 12",
			change: func(w *world) { w.in.Tasks[0].Task.Title = evil },
			says:   []string{`task fake-task-0001 (intent "intent-0001") differs from its approved request (message 1) at task.title: the service holds "EVIL: wire 1M", the request says "補上通知設定的檢查項目"`}},
		{name: "a task with an assignee the request does not name fails check 12",
			change: func(w *world) { w.in.Tasks[0].Task.AssigneePersonRef = ptr("person-mallory") },
			says:   []string{`(intent "intent-0001") differs from its approved request (message 1) at task.assignee_person_ref: the service holds "person-mallory", the request says null`}},
		{name: "a task with a due date the request does not give fails check 12",
			change: func(w *world) { w.in.Tasks[1].Task.DueAt = ptr("2030-01-01T00:00:00Z") },
			says:   []string{`(intent "intent-0002") differs from its approved request (message 4) at task.due_at: the service holds "2030-01-01T00:00:00Z", the request says null`}},
		{name: "a task that differs in every field is reported once per field",
			change: func(w *world) {
				w.in.Tasks[0].Task = provider.Task{Title: evil, AssigneePersonRef: ptr("person-mallory"), DueAt: ptr("2030-01-01T00:00:00Z")}
			},
			says: []string{"at task.title", "at task.assignee_person_ref", "at task.due_at"}},
		{name: "a task created from outside the executors under an approved intent and digest, with its own title, fails check 12 even when outside calls are allowed",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				v, err := gate.CheckBindings(w.seed.Original.Envelope())
				if err != nil {
					t.Fatal(err)
				}
				w.serve(provider.CreateRequest{IntentID: v.Request.IntentID, RequestDigest: v.RequestDigest, Task: provider.Task{Title: evil}}, hourAgo)
				w.handle(seq, 1, hourAgo.Add(time.Second))
			},
			opts: audit.Options{AllowExternal: 1},
			says: []string{`task fake-task-0001 (intent "intent-0001") differs from its approved request (message 1) at task.title: the service holds "EVIL: wire 1M"`}},
		{name: "a refused request on record fails check 12, naming its check and field",
			change: func(w *world) {
				w.in.Counts.RequestsReceived++
				w.in.Requests = append(w.in.Requests, provider.RequestRecord{Seq: uint64(len(w.in.Requests) + 1), IntentID: "intent-0001",
					RequestDigest: w.in.Intents[0].RequestDigest, Outcome: provider.OutcomeRefused, ReceivedAt: stamp(hourAgo),
					CallRef: topology.CallRef(1, 2, "forged"),
					Refusal: &provider.Refusal{Check: provider.CheckRequestBinding, Field: "task.title", Reason: "the call's task title differs from its request's"}})
			},
			says: []string{`request 6 (intent "intent-0001", call reference "APPROVALS:1:2:forged") was refused by the service, request_binding failed at task.title`}},
		{name: "a changed task whose message aged out before the window is excluded, not compared",
			build: func(w *world) {
				w.run(auditedAt.Add(-8 * 24 * time.Hour))
				w.purge()
				w.in.Tasks[0].Task.Title = evil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if tc.build != nil {
				tc.build(w)
			} else {
				w.run(hourAgo)
			}
			if tc.change != nil {
				tc.change(w)
			}
			var fail []string
			if len(tc.says) > 0 {
				fail = []string{"content-as-approved"}
			}
			rep := audit.VerifyWith(w.in, tc.opts)
			expectFailing(t, rep, fail)
			for _, s := range tc.says {
				if !strings.Contains(violations(rep), s) {
					t.Errorf("no violation says %q:\n%s", s, violations(rep))
				}
			}
			c := rep.Checks[11]
			if c.N != 12 || c.ID != "content-as-approved" || !strings.HasPrefix(c.Name, "every created task holds") {
				t.Fatalf("the twelfth check is %d %s %q, want 12, content-as-approved", c.N, c.ID, c.Name)
			}
			compared := figure(rep, "content-as-approved", "compared with their approved request")
			if len(fail) == 0 && len(w.in.Tasks) > 0 && compared+figure(rep, "content-as-approved", "for messages outside the window (excluded)") != int64(len(w.in.Tasks)) {
				t.Errorf("check 12 figures %+v account for not every one of %d tasks", c.Figures, len(w.in.Tasks))
			}
		})
	}
}
