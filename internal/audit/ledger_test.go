package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/keylife"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

const forgedDigest = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

// ledgerEntry is the ledger's entry binding (scope, intent) to digest and
// task, its latest revision written at written.
func ledgerEntry(t *testing.T, scope, intent, digest, task string, written time.Time) ledger.Stored {
	t.Helper()
	k, err := ledger.Key(scope, intent)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Stored{Key: k, Revision: uint64(written.Unix()), Written: written,
		Entry: taskservice.LedgerEntry{Scope: scope, IntentID: intent, RequestDigest: digest, TaskID: task}}
}

// honestLedger is the ledger the executors leave for the world's
// history: an entry per key created, with its first request's digest,
// written at written.
func honestLedger(t *testing.T, w *world, written time.Time) *audit.LedgerRead {
	l := &audit.LedgerRead{}
	for _, f := range w.in.Intents {
		scope := f.Scope
		if scope == "" {
			scope = taskservice.DefaultScope
		}
		l.Entries = append(l.Entries, ledgerEntry(t, scope, f.IntentID, f.RequestDigest, f.TaskID, written))
	}
	return l
}

func TestVerifyReportsALedgerEntryNoApprovalStandsBehind(t *testing.T) {
	hourAgo := auditedAt.Add(-time.Hour)
	eightDaysAgo := auditedAt.Add(-8 * 24 * time.Hour)
	cases := []struct {
		name string
		// build makes the history and its ledger from a fresh world.
		build func(t *testing.T, w *world)
		// says lists what ledger-entries-approved's violations must say;
		// none means the history must pass.
		says []string
		// figure and want, when set, are one of the check's figures.
		figure string
		want   int64
		// notApplicable, when set, is what the check must say instead.
		notApplicable string
	}{
		{name: "the entries the executors wrote for a correct history pass",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
			},
			figure: "of which an approval held stands behind (its key and request digest)", want: 2},
		{name: "an entry forged for a key no approval names fails, naming its key, digest and where it was found",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				w.in.Ledger.Entries = append(w.in.Ledger.Entries, ledgerEntry(t, "tenant-a", "c-intent-3", forgedDigest, "forged-task", hourAgo))
			},
			says: []string{`ledger entry tenant-a.c-intent-3 (bucket sendtwice-intents, revision `, "written 2026-11-30T11:00:00Z) binds intent \"c-intent-3\" in scope \"tenant-a\" to request digest " + forgedDigest + " and task forged-task",
				"the stream holds no approval of its key, and the entry is younger than the stream's max age 168h0m0s"}},
		{name: "an entry forged with another digest before the real approval ran fails, naming the approval it turns into a conflict",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				w.in.Ledger.Entries[1].Entry.RequestDigest = forgedDigest
			},
			says: []string{`ledger entry default.intent-0002`, "to request digest " + forgedDigest,
				"the approvals of its key carry other request digests (message 4 with sha256:", "so they end idempotency_conflict"}},
		{name: "an honest entry older than the max age whose approvals aged out passes, counted before the window",
			build: func(t *testing.T, w *world) {
				w.run(eightDaysAgo)
				w.in.Ledger = honestLedger(t, w, eightDaysAgo)
				w.purge()
			},
			figure: "of which written before the window (their approvals may have aged out; excluded)", want: 2},
		{name: "an entry younger than the max age whose approvals are gone fails",
			build: func(t *testing.T, w *world) {
				w.run(eightDaysAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				w.purge()
			},
			says: []string{"ledger entry default.intent-0001", "the stream holds no approval of its key"}},
		{name: "an entry a conflicting approval renewed says so",
			build: func(t *testing.T, w *world) {
				s, err := scenario.BuildSigned(scenario.TestKey(), hourAgo.Add(-time.Minute), time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				w.seed = s
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				v, err := gate.CheckBindings(s.Changed.Envelope())
				if err != nil {
					t.Fatal(err)
				}
				e := &w.in.Ledger.Entries[0].Entry
				e.RequestDigest, e.NotAfter = forgedDigest, keylife.Deadline(v.NotAfter, w.in.Stream.MaxAge)
			},
			says: []string{"ledger entry default.intent-0001", "(message 1's call renewed the entry: unless an approval with the entry's digest aged out before it, the entry was forged)"}},
		{name: "an entry in the probe's scope for a key the pipeline never carried passes, counted apart",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				w.in.Ledger.Entries = append(w.in.Ledger.Entries, ledgerEntry(t, servicetest.Scope, "probe-1", forgedDigest, "probe-task", hourAgo))
			},
			figure: "of which in the probe's or the demo's scope, for a key the pipeline never carried (excluded)", want: 1},
		{name: "a value that names another key fails",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = honestLedger(t, w, hourAgo)
				w.in.Ledger.Entries[0].Bad = `it names scope "default" and intent id "intent-0009", not its key`
			},
			says: []string{"ledger entry default.intent-0001", `is not an entry of its key: it names scope "default" and intent id "intent-0009"`}},
		{name: "a ledger the audit could not read makes the check not applicable, saying why",
			build: func(t *testing.T, w *world) {
				w.run(hourAgo)
				w.in.Ledger = &audit.LedgerRead{Unread: "opening bucket sendtwice-intents: nats: bucket not found"}
			},
			notApplicable: "the intent ledger could not be read: opening bucket sendtwice-intents: nats: bucket not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.build(t, w)
			rep := audit.Verify(w.in)
			var fail []string
			if len(tc.says) > 0 {
				fail = []string{"ledger-entries-approved"}
			}
			expectFailing(t, rep, fail)
			for _, s := range tc.says {
				if !strings.Contains(violations(rep), s) {
					t.Errorf("no violation says %q:\n%s", s, violations(rep))
				}
			}
			if tc.figure != "" {
				if got := figure(rep, "ledger-entries-approved", tc.figure); got != tc.want {
					t.Errorf("figure %q is %d, want %d", tc.figure, got, tc.want)
				}
			}
			if got := checkNamed(rep, "ledger-entries-approved").NotApplicable; got != tc.notApplicable {
				t.Errorf("not applicable %q, want %q", got, tc.notApplicable)
			}
		})
	}
}

// TestVerifyTellsAnOldHonestLedgerEntryWhoseApprovalAgedOutFromAForgedOne
// runs the check on a real stack: the executors' entry for a created
// intent, and two seconds later an entry forged for a key no approval
// names. Audited with the approval still held, the first stands on it; with
// the stream purged as ageing empties it and the audit's clock just past
// the first entry's max age, the first is counted before the window by the
// time the bucket stored it, and the forged one, younger, is still named.
func TestVerifyTellsAnOldHonestLedgerEntryWhoseApprovalAgedOutFromAForgedOne(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	created := sendAll(t, env, s.Original.Envelope())[0]
	ctx := ctx5(t)
	l := testenv.Ledger(t, env.JS, ledger.Options{})
	v, err := gate.CheckBindings(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	// The entry an executor serving CalDAV writes for its create.
	if err := l.Put(ctx, taskservice.LedgerEntry{Scope: taskservice.DefaultScope, IntentID: "intent-0001", RequestDigest: v.RequestDigest, TaskID: *created.TaskID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := l.Put(ctx, taskservice.LedgerEntry{Scope: taskservice.DefaultScope, IntentID: "intent-9999", RequestDigest: forgedDigest, TaskID: "forged-task"}); err != nil {
		t.Fatal(err)
	}
	forged := `ledger entry default.intent-9999 (bucket sendtwice-intents, revision `

	rep := verify(t, env)
	expectFailing(t, rep, []string{"ledger-entries-approved"})
	expectViolation(t, rep, forged, "the stream holds no approval of its key")
	if got := figure(rep, "ledger-entries-approved", "of which an approval held stands behind (its key and request digest)"); got != 1 {
		t.Errorf("%d entries stand on an approval held, want the executors' one", got)
	}

	stream, err := env.JS.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := audit.Load(ctx, env.NC)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Ledger.Entries) != 2 {
		t.Fatalf("the audit read %+v of the ledger, want two entries", in.Ledger)
	}
	in.Now = in.Ledger.Entries[0].Written.Add(in.Stream.MaxAge + time.Second)
	rep = audit.Verify(in)
	expectFailing(t, rep, []string{"ledger-entries-approved"})
	expectViolation(t, rep, forged, "the stream holds no approval of its key, and the entry is younger than the stream's max age 168h0m0s")
	if strings.Contains(violations(rep), "default.intent-0001") {
		t.Errorf("the honest entry whose approval aged out is reported:\n%s", violations(rep))
	}
	if got := figure(rep, "ledger-entries-approved", "of which written before the window (their approvals may have aged out; excluded)"); got != 1 {
		t.Errorf("%d entries counted before the window, want the executors' one", got)
	}
}
