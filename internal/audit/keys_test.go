package audit_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// inScope stores the seed's original request in scope as a new message.
func (w *world) inScope(scope string, at time.Time) uint64 {
	w.t.Helper()
	a, err := w.seed.InScope(w.seed.Original, scope)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.publish(a.Envelope(), at)
}

// deleteTask deletes the task of a key as its owner does: the task record
// goes, a delete record is kept, the key stays, marked deleted.
func (w *world) deleteTask(scope, intent string, at time.Time) {
	w.t.Helper()
	k := keyName(scope, intent)
	f, ok := w.first[k]
	if !ok {
		w.t.Fatalf("no key %s to delete the task of", k)
	}
	in := w.in
	in.Tasks = slices.DeleteFunc(in.Tasks, func(t provider.TaskRecord) bool { return t.TaskID == f.TaskID })
	in.Deletes = append(in.Deletes, provider.DeleteRecord{Seq: uint64(len(in.Deletes) + 1), Scope: f.Scope, IntentID: intent, TaskID: f.TaskID, DeletedAt: stamp(at)})
	in.Counts.TasksExisting--
	in.Keys.TasksDeleted++
	f.TaskDeleted, f.DeletedAt = true, stamp(at)
	w.first[k] = f
	for i := range in.Intents {
		if keyName(in.Intents[i].Scope, in.Intents[i].IntentID) == k {
			in.Intents[i] = f
		}
	}
}

// compact forgets a key as the service's compaction does: its intent
// record goes; its tasks, delete records and counters stay.
func (w *world) compact(scope, intent string) {
	w.t.Helper()
	k := keyName(scope, intent)
	if _, ok := w.first[k]; !ok {
		w.t.Fatalf("no key %s to compact", k)
	}
	delete(w.first, k)
	w.in.Intents = slices.DeleteFunc(w.in.Intents, func(f provider.FirstResult) bool { return keyName(f.Scope, f.IntentID) == k })
	w.in.Keys.Live--
	w.in.Keys.Compacted++
}

// retire removes every request and create record as the records
// retention does.
func (w *world) retire() {
	w.in.Keys.RecordsRetired += int64(len(w.in.Requests) + len(w.in.Creates))
	w.in.Requests, w.in.Creates = nil, nil
}

func TestVerifyJudgesKeysByScopeDeletesCompactionAndRetention(t *testing.T) {
	hourAgo := auditedAt.Add(-time.Hour)
	threeDaysAgo := auditedAt.Add(-72 * time.Hour)
	nineDaysAgo := auditedAt.Add(-9 * 24 * time.Hour)
	// signed makes the seed's approvals signed, approved at at and valid
	// for an hour.
	signed := func(w *world, at time.Time) {
		s, err := scenario.BuildSigned(scenario.TestKey(), at.Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		w.seed = s
	}
	twoScopes := func(w *world) (a, b uint64) {
		a = w.publish(w.seed.Original.Envelope(), hourAgo)
		w.handle(a, 1, hourAgo)
		b = w.inScope("team-b", hourAgo)
		w.handle(b, 1, hourAgo)
		w.handle(b, 2, hourAgo.Add(time.Minute))
		return a, b
	}
	type fig struct {
		check string
		name  string
		value int64
	}
	cases := []struct {
		name  string
		build func(w *world)
		fail  []string
		says  string
		fig   *fig
	}{
		{
			name:  "two scopes with one intent id and one task each pass: they are two keys, not a double create",
			build: func(w *world) { twoScopes(w) },
			fig:   &fig{"one-create-per-key", "keys with a create", 2},
		},
		{
			name: "a receipt in one scope that names the other scope's task fails check 2",
			build: func(w *world) {
				_, b := twoScopes(w)
				w.in.Receipts[b][1].TaskID = ptr("fake-task-0001")
			},
			fail: []string{"one-create-per-key", "requests-accounted"}, says: `is for intent "intent-0001" in scope "team-b", but names task fake-task-0001, which the service created for intent "intent-0001" in scope "default"`,
		},
		{
			name: "a call in another scope than its message's request fails check 7",
			build: func(w *world) {
				twoScopes(w)
				w.in.Requests[1].Scope = "team-c"
			},
			fail: []string{"calls-name-messages"}, says: `request 2 (APPROVALS:2:1:a2-1) is in scope "team-c", but message 2's request is in scope "team-b"`,
		},
		{
			name: "a receipt in another scope than its message's request fails check 8",
			build: func(w *world) {
				_, b := twoScopes(w)
				for _, r := range w.in.Receipts[b] {
					r.Scope = "default"
				}
			},
			fail: []string{"one-create-per-key", "receipts-name-messages"}, says: `names scope "default", but the message carries "team-b"`,
		},
		{
			name: "a task deleted by its owner, then its approval resent and replayed with the deleted mark, passes",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.deleteTask("", "intent-0001", hourAgo.Add(time.Minute))
				w.handle(w.publish(w.seed.Original.Envelope(), hourAgo), 1, hourAgo.Add(2*time.Minute))
				if r := w.in.Receipts[2][0]; !r.TaskDeleted || r.Outcome != "replayed" {
					t.Fatalf("the resend's receipt %+v is not replayed with the deleted mark", r)
				}
			},
			fig: &fig{"one-create-per-key", "replayed receipts of a deleted task", 1},
		},
		{
			name: "a replayed receipt that says its task was deleted when no task of its key was fails check 2",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Receipts[2][0].TaskDeleted = true
			},
			fail: []string{"one-create-per-key"}, says: `receipt receipt-a2-1 (replayed) of message 2 says the task fake-task-0001 of intent "intent-0001" in scope "default" was deleted, but the service deleted no task of that key`,
		},
		{
			name: "a key created again after its task was deleted fails check 2",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.deleteTask("", "intent-0001", hourAgo.Add(time.Minute))
				// A service that forgets the key with its task.
				w.compact("", "intent-0001")
				w.handle(w.publish(w.seed.Original.Envelope(), hourAgo), 1, hourAgo.Add(2*time.Minute))
			},
			fail: []string{"one-create-per-key", "first-records-unchanged"}, says: `receipt receipt-a2-1 of message 2: intent "intent-0001" in scope "default" was created again (task fake-task-0002) after its task fake-task-0001 was deleted`,
		},
		{
			name: "a deleted task whose counter was not moved fails check 3",
			build: func(w *world) {
				w.run(hourAgo)
				w.deleteTask("", "intent-0002", hourAgo)
				w.in.Counts.TasksExisting++
			},
			fail: []string{"counters"}, says: "creates executed 2 ≠ tasks existing 2 + tasks deleted 1",
		},
		{
			name: "a key whose task neither exists nor was deleted fails check 3",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Tasks = w.in.Tasks[1:]
				w.in.Counts.TasksExisting--
			},
			fail: []string{"counters"}, says: `intent "intent-0001" in scope "default" names task fake-task-0001, which neither exists nor was deleted`,
		},
		{
			name: "a key created with no key of its own (a create on a known key) fails check 3",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Keys.Live--
				w.in.Intents = w.in.Intents[:1]
			},
			fail: []string{"one-create-per-key", "counters", "first-records-unchanged"}, says: "creates executed 2 ≠ keys live 1 + keys compacted 0: a create that made no key of its own",
		},
		{
			name: "keys compacted after their deadline, their messages aged out, are outside the audit window, not violations",
			build: func(w *world) {
				signed(w, nineDaysAgo)
				w.run(nineDaysAgo)
				w.purge()
				w.compact("", "intent-0001")
				w.compact("", "intent-0002")
			},
			fig: &fig{"one-create-per-key", "receipts whose key was compacted after its deadline (outside the audit window)", 3},
		},
		{
			name: "a key missing while its approval could still resend it fails checks 2 and 5",
			build: func(w *world) {
				signed(w, hourAgo)
				w.run(hourAgo)
				w.compact("", "intent-0001")
			},
			fail: []string{"one-create-per-key", "first-records-unchanged"}, says: `receipt receipt-a1-1 (created) of message 1 names intent "intent-0001" in scope "default", whose key the service no longer keeps, although an approval could resend it until 2026-12-07T11:59:00Z: the key was forgotten too early`,
		},
		{
			name: "a key missing whose messages aged out but whose calls carried a deadline not yet passed fails check 2",
			build: func(w *world) {
				signed(w, threeDaysAgo)
				w.run(threeDaysAgo)
				w.in.Stream.MaxAge = 48 * time.Hour
				w.purge()
				// The calls carried not_after + the seven days the stream
				// kept messages when they were made.
				w.compact("", "intent-0001")
			},
			fail: []string{"one-create-per-key", "first-records-unchanged"}, says: "the key was forgotten too early",
		},
		{
			name: "a key of an approval that never expires, missing, fails checks 2 and 5",
			build: func(w *world) {
				w.run(hourAgo)
				w.compact("", "intent-0001")
			},
			fail: []string{"one-create-per-key", "first-records-unchanged"}, says: "although its approval never expires (the key must be kept forever)",
		},
		{
			name: "request and create records retired after the records retention are outside the window, not violations",
			build: func(w *world) {
				w.run(threeDaysAgo)
				w.in.Lifetime.RecordsRetention = 48 * time.Hour
				w.retire()
			},
			fig: &fig{"requests-accounted", "receipts whose call record was retired (not matched)", 4},
		},
		{
			name: "request and create records missing from a service that keeps them forever fail",
			build: func(w *world) {
				w.run(threeDaysAgo)
				w.retire()
			},
			fail: []string{"counters", "requests-accounted", "first-records-unchanged", "content-as-approved"}, says: "although it keeps records forever",
		},
		{
			name: "request and create records missing before the records retention has passed fail",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Lifetime.RecordsRetention = 48 * time.Hour
				w.retire()
			},
			fail: []string{"requests-accounted", "first-records-unchanged", "content-as-approved"}, says: "names a call the service never recorded",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.build(w)
			rep := audit.Verify(w.in)
			expectFailing(t, rep, tc.fail)
			if tc.says != "" && !strings.Contains(violations(rep), tc.says) {
				t.Fatalf("no violation says %q:\n%s", tc.says, violations(rep))
			}
			if f := tc.fig; f != nil {
				if got := figure(rep, f.check, f.name); got != f.value {
					t.Fatalf("check %s's figure %q is %d, want %d", f.check, f.name, got, f.value)
				}
			}
		})
	}
}
