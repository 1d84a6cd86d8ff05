package audit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// weekWindow is the window a report states for APPROVALS with the
// provisioned max age of a week, audited at auditedAt: sequences first to
// last holding messages, and the records excluded before and after it.
func weekWindow(first, last uint64, messages int, before, after audit.Excluded) *audit.Window {
	return &audit.Window{Stream: "APPROVALS", FirstSeq: first, LastSeq: last, Messages: messages, MaxAge: "168h0m0s",
		AuditedAt: "2026-11-30T12:00:00Z", Since: "2026-11-23T12:00:00Z", BeforeWindow: before, AfterWindow: after}
}

func TestVerifyChecks(t *testing.T) {
	hourAgo := auditedAt.Add(-time.Hour)
	eightDaysAgo := auditedAt.Add(-8 * 24 * time.Hour)
	otherKey, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	trusted := func(k *sign.Key) *sign.Keyring {
		kr, err := sign.NewKeyring(sign.ApproverFor(scenario.Reviewer, k.Public()))
		if err != nil {
			t.Fatal(err)
		}
		return kr
	}
	signedRun := func(w *world) {
		s, err := scenario.BuildSigned(scenario.TestKey(), hourAgo.Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		w.seed = s
		w.run(hourAgo)
	}
	cases := []struct {
		name string
		// build makes the input from a fresh world.
		build func(w *world)
		opts  audit.Options
		// fail lists the checks that must fail, exactly; none means the
		// input must pass.
		fail []string
		// says is a text check fail's violations must contain.
		says string
		// window, when set, is the window the report must state.
		window *audit.Window
	}{
		{
			name:  "a correct run passes every check",
			build: func(w *world) { w.run(hourAgo) },
		},
		{
			name: "a receipt from a second task service store fails check 11",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Receipts[2][0].StoreID = ptr("store-fedcba9876543210")
			},
			fail: []string{"one-store"}, says: "1 receipts name store store-fedcba9876543210, not the audited store " + auditedStore + ": a second task service instance answered",
		},
		{
			name: "receipts stored before receipts named their store pass",
			build: func(w *world) {
				w.run(hourAgo)
				for _, rs := range w.in.Receipts {
					for _, r := range rs {
						r.StoreID = nil
					}
				}
			},
		},
		{
			name: "a task service that names no store fails check 11",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Service.StoreID = ""
			},
			fail: []string{"one-store"}, says: "the task service did not name its store",
		},
		{
			name: "a message without a receipt or a dead letter fails check 1",
			build: func(w *world) {
				w.run(hourAgo)
				w.publish(w.seed.Original.Envelope(), hourAgo)
			},
			fail: []string{"one-terminal-outcome"}, says: "has neither a receipt nor a dead letter",
		},
		{
			name: "a message in doubt on one delivery and replayed on the next passes: in_doubt ends nothing",
			build: func(w *world) {
				w.run(hourAgo)
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.receipt(seq, 1, "doubt", document.OutcomeInDoubt, nil, hourAgo.Add(6*time.Second)).DecidedAfter = stamp(hourAgo.Add(time.Minute))
				w.handle(seq, 2, hourAgo.Add(time.Minute))
			},
		},
		{
			name: "a message whose only receipt is in_doubt fails check 1, saying until when",
			build: func(w *world) {
				w.run(hourAgo)
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.receipt(seq, 1, "doubt", document.OutcomeInDoubt, nil, hourAgo.Add(6*time.Second)).DecidedAfter = stamp(hourAgo.Add(time.Minute))
			},
			fail: []string{"one-terminal-outcome"}, says: "its last receipt says in doubt until " + stamp(hourAgo.Add(time.Minute)),
		},
		{
			name: "an intent created twice fails one-create-per-key",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Creates = append(w.in.Creates, w.in.Creates[0])
			},
			fail: []string{"one-create-per-key", "counters"}, says: `intent "intent-0001" in scope "default" was created 2 times`,
		},
		{
			name: "counters that differ from the records fail check 3",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Counts.TasksExisting++
			},
			fail: []string{"counters"}, says: "differ",
		},
		{
			name: "a receipt naming a call the service never recorded fails check 4",
			build: func(w *world) {
				w.run(hourAgo)
				r := w.in.Receipts[1][0]
				r.Delivery.Attempt = "never-called"
			},
			fail: []string{"requests-accounted"}, says: "names a call the service never recorded",
		},
		{
			name: "a replay that does not match its first record fails check 5",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Requests[1].TaskID = "fake-task-0099"
				w.in.Receipts[2][0].TaskID = ptr("fake-task-0099")
			},
			fail: []string{"one-create-per-key", "first-records-unchanged"}, says: "a replay for intent",
		},
		{
			name: "a rejected message that reached the service fails check 6",
			build: func(w *world) {
				w.run(hourAgo)
				rec := w.serve(provider.CreateRequest{IntentID: "intent-0001", RequestDigest: w.in.Intents[0].RequestDigest, CallRef: topology.CallRef(5, 1, "rejected")}, hourAgo)
				w.in.Requests[rec.Seq-1].ReplyDropped = true
			},
			fail: []string{"rejected-not-called", "gate-passes"}, says: "was rejected, yet request",
		},
		{
			name: "a task created by calling the service directly, with no approval message, fails check 7",
			build: func(w *world) {
				w.run(hourAgo)
				w.serve(provider.CreateRequest{IntentID: "intent-outside", RequestDigest: w.in.Intents[0].RequestDigest}, hourAgo)
			},
			fail: []string{"calls-name-messages"}, says: `request 6 (intent "intent-outside", call reference "") came from outside the executors`,
		},
		{
			name: "a task created directly passes when one call from outside is allowed",
			build: func(w *world) {
				w.run(hourAgo)
				w.serve(provider.CreateRequest{IntentID: "intent-outside", RequestDigest: w.in.Intents[0].RequestDigest}, hourAgo)
			},
			opts: audit.Options{AllowExternal: 1},
		},
		{
			name: "a call naming a stream sequence that does not exist fails check 7",
			build: func(w *world) {
				w.run(hourAgo)
				rec := w.serve(provider.CreateRequest{IntentID: "intent-0009", RequestDigest: w.in.Intents[0].RequestDigest, CallRef: topology.CallRef(99, 1, "ghost")}, hourAgo)
				w.in.Receipts[99] = []*document.Receipt{{SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-ghost", Outcome: rec.Outcome,
					IntentID: ptr("intent-0009"), TaskID: ptr(rec.TaskID), Delivery: document.Delivery{StreamSeq: 99, Delivered: 1, Attempt: "ghost"}, IssuedAt: stamp(hourAgo)}}
			},
			fail: []string{"calls-name-messages", "receipts-name-messages"}, says: "names message 99, beyond the stream's last sequence 5",
		},
		{
			name: "a call naming a message deleted from the middle of the stream fails check 7",
			build: func(w *world) {
				w.run(hourAgo)
				delete(w.in.Messages, 2)
				delete(w.in.Approvals, 2)
			},
			fail: []string{"calls-name-messages", "receipts-name-messages"}, says: "names message 2, deleted from the stream, which holds sequences 1 to 5",
		},
		{
			name: "one message reaching the service 51 times with one receipt fails check 10",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				for i := range 50 {
					w.call(seq, 1, fmt.Sprintf("again-%d", i), hourAgo)
				}
				w.handle(seq, 1, hourAgo)
			},
			fail: []string{"one-call-per-delivery"}, says: "message 1: delivery 1 made 51 calls",
		},
		{
			name: "calls on deliveries beyond the executors' delivery budget fail check 10",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				for d := uint64(1); d < 51; d++ {
					w.call(seq, d, fmt.Sprintf("d%d", d), hourAgo)
				}
				w.handle(seq, 51, hourAgo)
			},
			fail: []string{"one-call-per-delivery"}, says: "message 1: 47 calls name deliveries beyond the executors' delivery budget 4 (up to delivery 51)",
		},
		{
			name: "a delivery number repeated by a server that lost its consumer state passes when allowed",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.call(seq, 1, "before-the-crash", hourAgo)
				w.handle(seq, 1, hourAgo)
			},
			opts: audit.Options{AllowRepeatedDeliveries: 1},
		},
		{
			name: "a delivery number that made two calls fails check 10 when nothing is allowed",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.call(seq, 1, "before-the-crash", hourAgo)
				w.handle(seq, 1, hourAgo)
			},
			fail: []string{"one-call-per-delivery"}, says: "1 calls on a delivery number that had already made a call, 0 allowed",
		},
		{
			name: "an unparseable message with a created receipt and a service call fails check 9",
			build: func(w *world) {
				seq := w.publish([]byte(`{"schema_version": "task-envelope.v1", "candidate": `), hourAgo)
				rec := w.serve(provider.CreateRequest{IntentID: "intent-0001", RequestDigest: "sha256:" + strings.Repeat("0", 64), CallRef: topology.CallRef(seq, 1, "x")}, hourAgo)
				w.receipt(seq, 1, "x", rec.Outcome, &rec, hourAgo)
			},
			fail: []string{"calls-name-messages", "receipts-name-messages", "gate-passes"}, says: "message 1 (intent \"\") fails the gate at envelope",
		},
		{
			name: "a message bound to another candidate with a created receipt and a service call fails check 9",
			build: func(w *world) {
				tampered := w.seed.TamperedCases()[2] // candidate-changed
				seq := w.publish(tampered.Envelope, hourAgo)
				v, err := gate.CheckBindings(w.seed.Original.Envelope())
				if err != nil {
					t.Fatal(err)
				}
				rec := w.serve(provider.CreateRequest{IntentID: "intent-0001", RequestDigest: v.RequestDigest, Task: taskOf(v), CallRef: topology.CallRef(seq, 1, "x")}, hourAgo)
				w.receipt(seq, 1, "x", rec.Outcome, &rec, hourAgo)
			},
			fail: []string{"gate-passes"}, says: `message 1 (intent "intent-0001") fails the gate at candidate_binding`,
		},
		{
			name:  "signed approvals pass when verify trusts their signer",
			build: signedRun,
			opts:  audit.Options{Gate: &gate.Checker{Keys: trusted(scenario.TestKey())}},
		},
		{
			name:  "signed approvals that expired after they were stored still pass: expiry is judged at the time the stream stored them",
			build: func(w *world) { signedRun(w); w.in.Now = auditedAt.Add(3 * 24 * time.Hour) },
			opts:  audit.Options{Gate: &gate.Checker{Keys: trusted(scenario.TestKey())}},
			// The receipts are younger than the max age; nothing aged out.
		},
		{
			name:  "signed approvals fail check 9 when verify trusts another signer",
			build: signedRun,
			opts:  audit.Options{Gate: &gate.Checker{Keys: trusted(otherKey)}},
			fail:  []string{"gate-passes"}, says: "fails the gate at signature",
		},
		{
			name:  "unsigned approvals fail check 9 when verify is given trusted approvers",
			build: func(w *world) { w.run(hourAgo) },
			opts:  audit.Options{Gate: &gate.Checker{Keys: trusted(scenario.TestKey())}},
			fail:  []string{"gate-passes"}, says: "the approval is not signed",
		},
		{
			name:  "unsigned approvals pass with trusted approvers when unsigned ones are allowed",
			build: func(w *world) { w.run(hourAgo) },
			opts:  audit.Options{Gate: &gate.Checker{Keys: trusted(scenario.TestKey()), AllowUnsigned: true}},
		},
		{
			name:  "an empty stream while receipts and tasks from within the max age exist fails checks 7 and 8",
			build: func(w *world) { w.run(hourAgo); w.purge() },
			fail:  []string{"calls-name-messages", "receipts-name-messages"}, says: "although its records are younger than the stream's max age 168h0m0s: purged or deleted, not aged out",
		},
		{
			name:   "an empty stream whose records are all older than the max age passes, with everything before the window",
			build:  func(w *world) { w.run(eightDaysAgo); w.purge() },
			window: weekWindow(6, 5, 0, audit.Excluded{Messages: 5, Calls: 5, Receipts: 5}, audit.Excluded{}),
		},
		{
			name: "a message handled two days after it was stored, then aged out, is before the window by when its receipt says it was stored",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), eightDaysAgo)
				w.handle(seq, 1, eightDaysAgo.Add(48*time.Hour))
				w.purge()
			},
			window: weekWindow(2, 1, 0, audit.Excluded{Messages: 1, Calls: 1, Receipts: 1}, audit.Excluded{}),
		},
		{
			name: "a purged message's receipt that claims to be older than the max age is judged by when RECEIPTS stored it",
			build: func(w *world) {
				w.run(hourAgo)
				w.purge()
				w.in.Receipts[5][0].IssuedAt = stamp(eightDaysAgo)
				w.in.ReceiptsStored = map[uint64]time.Time{5: hourAgo}
			},
			fail: []string{"calls-name-messages", "receipts-name-messages"}, says: "receipt receipt-rejected (rejected, intent \"intent-0001\") names message 5, removed from the stream",
		},
		{
			name: "the records of a message stored while verify read are after the window, not violations",
			build: func(w *world) {
				w.run(hourAgo)
				seq := w.publish(w.seed.NewIntent.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				// The stream was read before this message was stored.
				delete(w.in.Messages, seq)
				delete(w.in.Approvals, seq)
				w.in.Stream.LastSeq--
				w.in.Stream.Msgs--
			},
			window: weekWindow(1, 5, 5, audit.Excluded{}, audit.Excluded{Messages: 1, Calls: 1, Receipts: 1}),
		},
		{
			name: "service records of messages that aged out are excluded, not violations",
			build: func(w *world) {
				w.run(eightDaysAgo)
				// The messages and their receipts age out; the service keeps
				// its records forever.
				w.purge()
				w.in.Receipts = map[uint64][]*document.Receipt{}
				w.handle(w.publish(w.seed.Original.Envelope(), hourAgo), 1, hourAgo)
			},
			window: weekWindow(6, 6, 1, audit.Excluded{Messages: 4, Calls: 5, Receipts: 0}, audit.Excluded{}),
		},
		{
			name: "a message for intent A whose receipt and service call are for intent B fails checks 7 and 8",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				v, err := gate.CheckBindings(w.seed.NewIntent.Envelope())
				if err != nil {
					t.Fatal(err)
				}
				rec := w.serve(provider.CreateRequest{IntentID: v.Request.IntentID, RequestDigest: v.RequestDigest, Task: taskOf(v), CallRef: topology.CallRef(seq, 1, "b")}, hourAgo)
				r := w.receipt(seq, 1, "b", rec.Outcome, &rec, hourAgo)
				r.RequestID = ptr(v.Request.RequestID)
			},
			fail: []string{"calls-name-messages", "receipts-name-messages"}, says: `request 1 (APPROVALS:1:1:b) is for intent "intent-0002", but message 1 is for intent "intent-0001"`,
		},
		{
			name: "a call with its message's intent but another request's digest and task fails checks 7 and 12",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				v, err := gate.CheckBindings(w.seed.Changed.Envelope())
				if err != nil {
					t.Fatal(err)
				}
				rec := w.serve(provider.CreateRequest{IntentID: "intent-0001", RequestDigest: v.RequestDigest, Task: taskOf(v), CallRef: topology.CallRef(seq, 1, "c")}, hourAgo)
				w.receipt(seq, 1, "c", rec.Outcome, &rec, hourAgo)
			},
			fail: []string{"calls-name-messages", "content-as-approved"}, says: "carries request digest",
		},
		{
			name: "a message created on its first delivery and replayed on its second passes",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.handle(seq, 2, hourAgo.Add(time.Minute))
				w.handle(seq, 3, hourAgo.Add(2*time.Minute))
			},
		},
		{
			name: "a message with a created and a dead_lettered receipt fails check 1",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.receipt(seq, 5, "dead", document.OutcomeDeadLettered, nil, hourAgo.Add(time.Minute))
				w.in.DeadLetters[seq] = "deliveries ran out"
			},
			fail: []string{"one-terminal-outcome"}, says: "message 1 has contradictory terminal outcomes: created (receipt receipt-a1-1, delivery 1) and dead_lettered (receipt receipt-dead, delivery 5)",
		},
		{
			name: "a message with a replayed receipt and a dead letter but no dead_lettered receipt fails check 1",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.in.Receipts[seq][0].Outcome = document.OutcomeReplayed
				w.in.Requests[0].Outcome = document.OutcomeReplayed
				w.in.DeadLetters[seq] = "deliveries ran out"
			},
			fail: []string{"one-terminal-outcome", "first-records-unchanged"}, says: "replayed (receipt receipt-a1-1, delivery 1) and a dead letter in DEADLETTERS",
		},
		{
			name: "a message with a created and a rejected receipt fails check 1, and check 6 for its call",
			build: func(w *world) {
				seq := w.publish(w.seed.Original.Envelope(), hourAgo)
				w.handle(seq, 1, hourAgo)
				w.receipt(seq, 2, "refused", document.OutcomeRejected, nil, hourAgo.Add(time.Minute))
			},
			fail: []string{"one-terminal-outcome", "rejected-not-called"}, says: "created (receipt receipt-a1-1, delivery 1) and rejected (receipt receipt-refused, delivery 2)",
		},
		{
			name: "a message with a rejected and a dead_lettered receipt fails check 1",
			build: func(w *world) {
				tampered := w.seed.TamperedCases()[2]
				seq := w.publish(tampered.Envelope, hourAgo)
				w.receipt(seq, 1, "refused", document.OutcomeRejected, nil, hourAgo)
				w.receipt(seq, 2, "dead", document.OutcomeDeadLettered, nil, hourAgo)
				w.in.DeadLetters[seq] = "deliveries ran out"
			},
			fail: []string{"one-terminal-outcome"}, says: "rejected (receipt receipt-refused, delivery 1) and dead_lettered (receipt receipt-dead, delivery 2)",
		},
		{
			name: "a message with an idempotency_conflict and a replayed receipt fails check 1",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Receipts[3] = append(w.in.Receipts[3], w.in.Receipts[2][0])
			},
			fail: []string{"one-terminal-outcome", "requests-accounted", "receipts-name-messages"}, says: "message 3 has contradictory terminal outcomes: idempotency_conflict (receipt receipt-a3-1, delivery 1) and replayed (receipt receipt-a2-1, delivery 1)",
		},
		{
			name: "a lowered max age on APPROVALS fails check 13, naming the field and both values",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology.Streams[topology.ApprovalsStream].MaxAge = 2 * time.Second
			},
			fail: []string{"as-provisioned"}, says: "stream APPROVALS: max_age: expected 168h0m0s, found 2s",
		},
		{
			name: "a raised byte limit on RECEIPTS fails check 13",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology.Streams[topology.ReceiptsStream].MaxBytes = -1
			},
			fail: []string{"as-provisioned"}, says: "stream RECEIPTS: max_bytes: expected 1073741824, found -1",
		},
		{
			name: "a consumer rewritten to filter nothing with a budget of one fails check 13",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology.Consumer.FilterSubject, w.in.Topology.Consumer.MaxDeliver = "approvals.nothing", 1
			},
			fail: []string{"as-provisioned"}, says: `consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`,
		},
		{
			name: "a deleted dead-letter stream fails check 13",
			build: func(w *world) {
				w.run(hourAgo)
				delete(w.in.Topology.Streams, topology.DeadLetterStream)
			},
			fail: []string{"as-provisioned"}, says: "stream DEADLETTERS: expected to exist, found none",
		},
		{
			name: "no record of what was provisioned fails check 13, even when the topology is as its defaults make it",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology = asProvisioned(topology.Config{})
				w.in.Topology.Provisioned = nil
			},
			fail: []string{"as-provisioned"}, says: "no record of what was provisioned (bucket sendtwice-topology)",
		},
		{
			name: "without a record the topology is compared with its defaults",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology = asProvisioned(topology.Config{})
				w.in.Topology.Provisioned = nil
				w.in.Topology.Consumer.AckWait = time.Hour
			},
			fail: []string{"as-provisioned"}, says: "consumer executor: ack_wait: expected 30s, found 1h0m0s",
		},
		{
			name: "a record that cannot be read fails check 13",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Topology.Provisioned, w.in.Topology.RecordErr = nil, "topology: the record in bucket sendtwice-topology, key provisioned, does not decode"
			},
			fail: []string{"as-provisioned"}, says: "the record of what was provisioned (bucket sendtwice-topology) cannot be read",
		},
		{
			name: "a dead letter that does not decode fails check 14 with its stream and sequence",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Foreign = []audit.Undecodable{{Stream: topology.DeadLetterStream, Seq: 4, Err: "no Sendtwice-Stream-Seq header naming the approval message"}}
			},
			fail: []string{"no-foreign-records"}, says: "the record at DEADLETTERS sequence 4 does not decode: no Sendtwice-Stream-Seq header",
		},
		{
			name: "an undecodable receipt is reported with its sequence in check 8",
			build: func(w *world) {
				w.run(hourAgo)
				w.in.Undecodable = []audit.Undecodable{{Seq: 17, StreamSeq: 3, Err: "document: not JSON"}}
			},
			fail: []string{"receipts-name-messages"}, says: "the receipt at RECEIPTS sequence 17 (for message 3) does not decode: document: not JSON",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.build(w)
			rep := audit.VerifyWith(w.in, tc.opts)
			got := failing(rep.Checks)
			if !slices.Equal(got, tc.fail) {
				for _, c := range rep.Checks {
					if !c.OK {
						t.Logf("check %s (%s): %v", c.ID, c.Name, c.Violations)
					}
				}
				t.Fatalf("failing checks %v, want %v", got, tc.fail)
			}
			if rep.OK != (len(tc.fail) == 0) {
				t.Fatalf("report ok %v with failing checks %v", rep.OK, got)
			}
			if tc.window != nil && rep.Window != *tc.window {
				t.Fatalf("window %+v, want %+v", rep.Window, *tc.window)
			}
			if tc.says != "" && !strings.Contains(violations(rep), tc.says) {
				t.Fatalf("no violation says %q:\n%s", tc.says, violations(rep))
			}
		})
	}
}
