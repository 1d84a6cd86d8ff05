package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// These tests break the invariants on a real stack, by hand and from
// outside the executors, and expect verify to see it.

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// publishApproval stores an envelope in APPROVALS, with no executor
// running, and returns its stream sequence.
func publishApproval(t *testing.T, env *testenv.Env, intent string, envelope []byte) uint64 {
	t.Helper()
	ack, err := env.JS.Publish(ctx5(t), subjects.Approval("", intent), envelope)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// storeReceipt publishes a receipt to RECEIPTS as an executor would, for
// delivery 1 of message seq and the service's reply resp.
func storeReceipt(t *testing.T, env *testenv.Env, seq uint64, attempt, intent string, resp provider.CreateResponse) {
	t.Helper()
	r := document.Receipt{SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-" + attempt, Outcome: resp.Outcome,
		IntentID: &intent, TaskID: &resp.TaskID,
		Counts:   &document.Counts{RequestsReceived: resp.Counts.RequestsReceived, CreatesExecuted: resp.Counts.CreatesExecuted, TasksExisting: resp.Counts.TasksExisting},
		Delivery: document.Delivery{StreamSeq: seq, Delivered: 1, Attempt: attempt, Executor: "exec-forged"},
		IssuedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	storeRawReceipt(t, env, seq, intent, resp.Outcome, body)
}

func storeRawReceipt(t *testing.T, env *testenv.Env, seq uint64, intent, outcome string, body []byte) uint64 {
	t.Helper()
	m := nats.NewMsg(subjects.Receipt("", intent))
	m.Data = body
	m.Header.Set(topology.HeaderOutcome, outcome)
	m.Header.Set(topology.HeaderStreamSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(topology.HeaderDelivered, "1")
	ack, err := env.JS.PublishMsg(ctx5(t), m, jetstream.WithExpectStream(topology.ReceiptsStream))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func expectViolation(t *testing.T, rep audit.Report, says ...string) {
	t.Helper()
	if rep.OK {
		t.Fatal("verify passed")
	}
	all := violations(rep)
	for _, s := range says {
		if !strings.Contains(all, s) {
			t.Errorf("no violation says %q:\n%s", s, all)
		}
	}
}

func TestVerifyFailsOnATaskCreatedByCallingTheServiceDirectly(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope())
	if rep := verify(t, env); !rep.OK {
		t.Fatalf("verify failed before the direct call:\n%s", violations(rep))
	}

	// A create with no approval message and no call reference.
	resp := env.CreateDirectly(s.NewIntent.Envelope(), "intent-outside", "")
	if resp.Outcome != provider.OutcomeCreated {
		t.Fatalf("outcome %s", resp.Outcome)
	}
	expectViolation(t, verify(t, env), `intent "intent-outside", call reference "") came from outside the executors`)
}

func TestVerifyPassesADirectCallOnlyWhenCallsFromOutsideAreAllowed(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope())
	env.CreateDirectly(s.NewIntent.Envelope(), "intent-outside", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := audit.Load(ctx, env.NC)
	if err != nil {
		t.Fatal(err)
	}
	if rep := audit.VerifyWith(in, audit.Options{AllowExternal: 1}); !rep.OK {
		t.Fatalf("verify failed with one call from outside allowed:\n%s", violations(rep))
	}
	if rep := audit.VerifyWith(in, audit.Options{AllowExternal: 0}); rep.OK {
		t.Fatal("verify passed with no call from outside allowed")
	}
}

func TestVerifyFailsWhenTheCallAndReceiptOfAMessageAreForAnotherIntent(t *testing.T) {
	env := testenv.Start(t)
	s := testenv.Seed(t)
	// A message for intent-0001; the service records a call for intent-0002
	// under its call reference, and RECEIPTS holds a receipt for
	// intent-0002 at its sequence.
	seq := publishApproval(t, env, "intent-0001", s.Original.Envelope())
	ref := topology.CallRef(seq, 1, "forged")
	resp := env.CreateDirectly(s.NewIntent.Envelope(), "intent-0002", ref)
	storeReceipt(t, env, seq, "forged", "intent-0002", resp)

	expectViolation(t, verify(t, env),
		`is for intent "intent-0002", but message 1 is for intent "intent-0001"`,
		`names intent "intent-0002", but the message carries "intent-0001"`)
}

func TestVerifyFailsWhenAMessageTheGateRefusesHasACreatedReceiptAndACall(t *testing.T) {
	env := testenv.Start(t)
	s := testenv.Seed(t)
	// Bound to another candidate: the executor's gate would refuse it.
	var tampered []byte
	for _, c := range s.TamperedCases() {
		if c.Check == gate.CheckCandidateBinding {
			tampered = c.Envelope
			break
		}
	}
	seq := publishApproval(t, env, "intent-0001", tampered)
	resp := env.CreateDirectly(s.Original.Envelope(), "intent-0001", topology.CallRef(seq, 1, "forged"))
	storeReceipt(t, env, seq, "forged", "intent-0001", resp)

	expectViolation(t, verify(t, env), "fails the gate at candidate_binding")
}

// sentTwice starts a stack with one executor, sends the seed's original
// approval twice through it and returns the stack and its approvals stream.
func sentTwice(t *testing.T) (*testenv.Env, jetstream.Stream) {
	t.Helper()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope(), s.Original.Envelope())
	st, err := env.JS.Stream(ctx5(t), topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	return env, st
}

func TestVerifyFailsWhenTheApprovalsStreamIsPurgedWhileItsRecordsAreYoung(t *testing.T) {
	env, st := sentTwice(t)
	if err := st.Purge(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	expectViolation(t, verify(t, env), "purged or deleted, not aged out")
}

func TestVerifyReportsAnUndecodableReceiptWithItsSequence(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope())
	bad := storeRawReceipt(t, env, 1, "intent-0001", document.OutcomeCreated, []byte(`{"schema_version": "task-receipt.v1", "outcome": `))
	sendAll(t, env, s.Original.Envelope())

	rep := verify(t, env)
	expectViolation(t, rep, "the receipt at RECEIPTS sequence "+strconv.FormatUint(bad, 10)+" (for message 1) does not decode")
	for _, c := range rep.Checks {
		if !c.OK && !strings.Contains(c.Name, "receipt") {
			t.Errorf("check %s (%s) failed: %v", c.ID, c.Name, c.Violations)
		}
	}
}

// verify re-runs the destination check with the audited service's
// destinations: a task made from an approval for another service (the
// issue's story: a fake task approved, a real one written) is reported,
// and the same stream audited as the fake service's holds.
func TestVerifyFailsWhenAMessageForAnotherServiceHasACreatedReceipt(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := audit.Load(ctx, env.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		serves []gate.Destination
		ok     bool
	}{
		{"audited as the fake service's default destination, every check holds", []gate.Destination{executor.FakeDefault}, true},
		{"audited as a CalDAV calendar's, the fake task's message fails the gate at destination",
			[]gate.Destination{{Provider: document.ProviderCalDAV, Name: document.DefaultDestination}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := audit.VerifyWith(in, audit.Options{Serves: c.serves})
			if c.ok {
				if !rep.OK {
					t.Fatalf("verify failed: %+v", rep.Checks)
				}
				return
			}
			expectViolation(t, rep, "fails the gate at destination")
			if !slices.Contains(rep.Gate.Checks, gate.CheckDestination) {
				t.Errorf("the report does not say it re-ran destination: %+v", rep.Gate)
			}
		})
	}
}

// These tests change the streams and the consumer behind provisioning's
// back, or store in the streams what the pipeline never writes, on a real
// stack, and expect verify to report it rather than pass or abort.

func TestVerifyReportsEveryChangeSinceProvisioning(t *testing.T) {
	updateStream := func(name string, change func(*jetstream.StreamConfig)) func(*testing.T, *testenv.Env) {
		return func(t *testing.T, env *testenv.Env) {
			s, err := env.JS.Stream(ctx5(t), name)
			if err != nil {
				t.Fatal(err)
			}
			sc := s.CachedInfo().Config
			change(&sc)
			if _, err := env.JS.UpdateStream(ctx5(t), sc); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The consumer rewritten as the operator role could through the
	// legacy create subject: another filter and a budget of one.
	rewriteConsumer := func(t *testing.T, env *testenv.Env) {
		testenv.ChangeConsumer(t, env.JS, func(cc *jetstream.ConsumerConfig) { cc.FilterSubject, cc.MaxDeliver = "approvals.nothing", 1 })
	}
	for _, c := range []struct {
		name   string
		change func(*testing.T, *testenv.Env)
		says   []string
	}{
		{"a raised byte limit on APPROVALS is reported",
			updateStream(topology.ApprovalsStream, func(sc *jetstream.StreamConfig) { sc.MaxBytes = -1 }),
			[]string{"as-provisioned: stream APPROVALS: max_bytes: expected 1073741824, found -1"}},
		{"a smaller message size limit on RECEIPTS is reported",
			updateStream(topology.ReceiptsStream, func(sc *jetstream.StreamConfig) { sc.MaxMsgSize = 1024 }),
			[]string{fmt.Sprintf("as-provisioned: stream RECEIPTS: max_msg_size: expected %d, found 1024", topology.ReceiptMaxMsg)}},
		{"a consumer rewritten to filter nothing with a budget of one is reported field by field",
			rewriteConsumer,
			[]string{`as-provisioned: consumer executor: filter_subject: expected "approvals.>", found "approvals.nothing"`,
				"as-provisioned: consumer executor: max_deliver: expected -1, found 1"}},
		{"a deleted record is reported, and a topology as its defaults make it is compared with them",
			func(t *testing.T, env *testenv.Env) {
				if err := env.JS.DeleteKeyValue(ctx5(t), topology.RecordBucket); err != nil {
					t.Fatal(err)
				}
			},
			[]string{"as-provisioned: no record of what was provisioned (bucket sendtwice-topology)", "as-provisioned: consumer executor: ack_wait: expected 30s, found 2s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.Start(t)
			env.Executor(executor.Config{ID: "exec-1"})
			s := testenv.Seed(t)
			sendAll(t, env, s.Original.Envelope())
			c.change(t, env)
			rep := verify(t, env)
			expectViolation(t, rep)
			all := violations(rep)
			for _, w := range c.says {
				if !strings.Contains(all, w) {
					t.Errorf("no violation says %q:\n%s", w, all)
				}
			}
			if got := failing(rep.Checks); !slices.Equal(got, []string{"as-provisioned"}) {
				t.Errorf("failing checks %v, want [13]:\n%s", got, all)
			}
		})
	}
}

// A MaxAge lowered to a second ages every message out at once. Judged by
// that MaxAge, every record would be older than it and excused as aged
// out; judged by the MaxAge provisioned, the messages were removed while
// their records are young: a purge, reported as such.
func TestVerifyJudgesAgeByTheMaxAgeProvisionedNotALoweredOne(t *testing.T) {
	env, st := sentTwice(t)
	sc := st.CachedInfo().Config
	sc.MaxAge, sc.Duplicates = time.Second, time.Second
	if _, err := env.JS.UpdateStream(ctx5(t), sc); err != nil {
		t.Fatal(err)
	}
	testenv.AwaitStreamState(t, env.JS, sc.Name, 20*time.Second, "the messages did not age out",
		func(s jetstream.StreamState) bool { return s.Msgs == 0 })
	// Messages stored by the same second count as aged out by the lowered
	// MaxAge, not by the one provisioned.
	time.Sleep(1100 * time.Millisecond)

	rep := verify(t, env)
	expectViolation(t, rep, "as-provisioned: stream APPROVALS: max_age: expected 168h0m0s, found 1s",
		"purged or deleted, not aged out")
	if rep.Window.MaxAge != "168h0m0s" || rep.Window.MaxAgeFrom != "as provisioned" || rep.Window.BeforeWindow != (audit.Excluded{}) {
		t.Fatalf("window %+v: want the max age as provisioned and nothing excused as aged out", rep.Window)
	}
}

// statusOnDeadLetters stores status messages in DEADLETTERS the two ways
// one gets there: a pull request whose reply subject the stream captures
// (the server's 408 answer is stored), and a message published to look
// like a status message. It returns their sequences.
func statusOnDeadLetters(t *testing.T, env *testenv.Env) []uint64 {
	t.Helper()
	st, err := env.JS.Stream(ctx5(t), topology.ReceiptsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx5(t), jetstream.ConsumerConfig{Durable: "spy", FilterSubject: "receipts.nothing", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	before := testenv.StreamState(t, env.JS, topology.DeadLetterStream)
	pull := nats.NewMsg("$JS.API.CONSUMER.MSG.NEXT." + topology.ReceiptsStream + ".spy")
	pull.Reply = subjects.DeadLetter("", "intent-0001")
	pull.Data = []byte(`{"batch": 1, "expires": 100000000}`)
	if err := env.NC.PublishMsg(pull); err != nil {
		t.Fatal(err)
	}
	testenv.AwaitStreamState(t, env.JS, topology.DeadLetterStream, 10*time.Second, "the server's answer to the pull was not stored in DEADLETTERS",
		func(s jetstream.StreamState) bool { return s.LastSeq > before.LastSeq })
	fake := nats.NewMsg(subjects.DeadLetter("", "intent-0001"))
	fake.Header.Set("Status", "408")
	fake.Header.Set("Description", "Request Timeout")
	ack, err := env.JS.PublishMsg(ctx5(t), fake)
	if err != nil {
		t.Fatal(err)
	}
	return []uint64{before.LastSeq + 1, ack.Sequence}
}

func TestVerifyReportsStatusMessagesInEveryStreamAndStillRunsEveryCheck(t *testing.T) {
	env := testenv.Start(t)
	_, stop := env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope())
	dead := statusOnDeadLetters(t, env)
	// The same look-alike in RECEIPTS, followed by a receipt, where a
	// reader that takes it for the answer to its pull stops or waits for
	// it for ever.
	fake := nats.NewMsg(subjects.Receipt("", "intent-0001"))
	fake.Header.Set("Status", "404")
	ack, err := env.JS.PublishMsg(ctx5(t), fake)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	seq := publishApproval(t, env, "intent-0001", s.Original.Envelope())
	storeReceipt(t, env, seq, "after", "intent-0001", env.CreateDirectly(s.Original.Envelope(), "intent-0001", topology.CallRef(seq, 1, "after")))

	rep := verify(t, env)
	expectViolation(t, rep,
		fmt.Sprintf("no-foreign-records: the record at DEADLETTERS sequence %d does not decode: a status message (Nats-Pending-Messages", dead[0]),
		fmt.Sprintf("no-foreign-records: the record at DEADLETTERS sequence %d does not decode: a status message (Status 408 Request Timeout) with no payload", dead[1]),
		fmt.Sprintf("receipts-name-messages: the receipt at RECEIPTS sequence %d does not decode: a status message (Status 404)", ack.Sequence))
	if len(rep.Checks) != 15 {
		t.Fatalf("%d checks ran, want all 15", len(rep.Checks))
	}
	expectFailing(t, rep, []string{"receipts-name-messages", "no-foreign-records"})
}

func TestVerifyReportsAStatusMessageStoredAsAnApproval(t *testing.T) {
	env := testenv.Start(t)
	fake := nats.NewMsg(subjects.Approval("", "intent-0001"))
	fake.Header.Set("Status", "408")
	ack, err := env.JS.PublishMsg(ctx5(t), fake)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify(t, env)
	expectViolation(t, rep,
		fmt.Sprintf("no-foreign-records: the record at APPROVALS sequence %d does not decode: a status message (Status 408)", ack.Sequence),
		fmt.Sprintf("one-terminal-outcome: message %d (intent \"\") has neither a receipt nor a dead letter", ack.Sequence))
}

func TestVerifyFailsOnAMessageWithACreatedAndADeadLetteredReceipt(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	rc := sendAll(t, env, s.Original.Envelope())[0]
	if rc.Outcome != document.OutcomeCreated {
		t.Fatalf("outcome %s", rc.Outcome)
	}
	if rep := verify(t, env); !rep.OK {
		t.Fatalf("verify failed before the dead letter:\n%s", violations(rep))
	}
	// A later delivery dead-letters the message its first one created, as
	// an executor that did not look for the stored receipt did.
	seq := rc.Delivery.StreamSeq
	intent := *rc.IntentID
	r := document.Receipt{SchemaVersion: document.ReceiptVersion, ReceiptID: "receipt-late", Outcome: document.OutcomeDeadLettered,
		IntentID: &intent, Failure: &document.Failure{Reason: "deliveries ran out", Attempts: 4},
		Delivery: document.Delivery{StreamSeq: seq, Delivered: 5, Attempt: "late", Executor: "exec-2"},
		IssuedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	storeRawReceipt(t, env, seq, intent, document.OutcomeDeadLettered, body)
	expectViolation(t, verify(t, env), fmt.Sprintf("one-terminal-outcome: message %d has contradictory terminal outcomes: created (receipt %s, delivery 1) and dead_lettered (receipt receipt-late, delivery 5)",
		seq, rc.ReceiptID))
}
