package audit_test

import (
	"context"
	"encoding/json"
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

// callService calls the task service's create endpoint directly, as the
// request of envelope (which must be readable by the gate), under intent
// and with the given call reference.
func callService(t *testing.T, env *testenv.Env, envelope []byte, intent, callRef string) provider.CreateResponse {
	t.Helper()
	v, err := gate.CheckBindings(envelope)
	if err != nil {
		t.Fatal(err)
	}
	// The envelope's request, under intent: a request document of its own
	// (with its own digest when the intent differs), as the service
	// requires of every create.
	q := *v.Request
	q.IntentID = intent
	doc, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	req, err := provider.RequestFor(doc)
	if err != nil {
		t.Fatal(err)
	}
	req.CallRef = callRef
	resp, err := env.Service.Create(ctx5(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
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
	resp := callService(t, env, s.NewIntent.Envelope(), "intent-outside", "")
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
	callService(t, env, s.NewIntent.Envelope(), "intent-outside", "")
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
	resp := callService(t, env, s.NewIntent.Envelope(), "intent-0002", ref)
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
	resp := callService(t, env, s.Original.Envelope(), "intent-0001", topology.CallRef(seq, 1, "forged"))
	storeReceipt(t, env, seq, "forged", "intent-0001", resp)

	expectViolation(t, verify(t, env), "fails the gate at candidate_binding")
}

func TestVerifyFailsWhenTheApprovalsStreamIsPurgedWhileItsRecordsAreYoung(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	sendAll(t, env, s.Original.Envelope(), s.Original.Envelope())
	st, err := env.JS.Stream(ctx5(t), topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
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
