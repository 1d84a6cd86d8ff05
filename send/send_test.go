package send_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/taskservice"
)

func docs(a scenario.Approved) send.Documents {
	return send.Documents{Candidate: a.Candidate, Request: a.Request, Approval: a.Approval}
}

// built is the scenario's original envelope, as Build makes it from the
// documents.
func built(t *testing.T) *send.Envelope {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	e, err := send.Build(docs(s.Original))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func trusted(t *testing.T, name string, pub ed25519.PublicKey) *send.TrustedApprovers {
	t.Helper()
	tr, err := send.NewTrustedApprovers(send.Approver{Name: name, PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestALocalCheckRunsTheModeItIsGivenByName(t *testing.T) {
	key := scenario.TestKey()
	signed, err := scenario.BuildSigned(key, scenario.ApprovedAt, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	inTime := func() time.Time { return scenario.ApprovedAt.Add(time.Minute) }
	late := func() time.Time { return scenario.ApprovedAt.Add(2 * time.Hour) }
	for _, tc := range []struct {
		name       string
		check      send.Check
		docs       send.Documents
		wantErr    error
		wantCheck  string
		signedBy   string
		notChecked []string
	}{
		{"the zero check runs nothing and refuses", send.Check{}, docs(signed.Original), send.ErrNoCheck, "", "", nil},
		{"a trusted check without approvers refuses", send.Trusted(nil), docs(signed.Original), send.ErrNoTrustedApprovers, "", "", nil},
		{"the bindings pass a signed approval and say what they did not check", send.Bindings(), docs(signed.Original), nil, "", "", []string{"signature", "expiry", "scope"}},
		{"the bindings pass an unsigned approval", send.Bindings(), docs(unsigned.Original), nil, "", "", []string{"signature", "expiry", "scope"}},
		{"the bindings refuse a changed request", send.Bindings(),
			send.Documents{Candidate: signed.Original.Candidate, Request: signed.Changed.Request, Approval: signed.Original.Approval}, send.ErrRefused, send.CheckRequestBinding, "", nil},
		{"a trusted check passes the signer's approval and names the signer", send.Trusted(trusted(t, scenario.Reviewer, key.Public())).At(inTime), docs(signed.Original), nil, "", scenario.Reviewer, nil},
		{"a trusted check refuses another key's approval", send.Trusted(trusted(t, scenario.Reviewer, other)).At(inTime), docs(signed.Original), send.ErrRefused, send.CheckSignature, "", nil},
		{"a trusted check refuses an unsigned approval", send.Trusted(trusted(t, scenario.Reviewer, key.Public())).At(inTime), docs(unsigned.Original), send.ErrRefused, send.CheckSignature, "", nil},
		{"a trusted check refuses an expired approval", send.Trusted(trusted(t, scenario.Reviewer, key.Public())).At(late), docs(signed.Original), send.ErrRefused, send.CheckExpiry, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := send.Build(tc.docs)
			if err != nil {
				t.Fatal(err)
			}
			fromDocs, errDocs := tc.check.Documents(tc.docs)
			fromEnv, errEnv := tc.check.Envelope(env)
			for _, r := range []struct {
				v   *send.Verdict
				err error
			}{{fromDocs, errDocs}, {fromEnv, errEnv}} {
				if tc.wantErr != nil {
					if r.v != nil || !errors.Is(r.err, tc.wantErr) {
						t.Fatalf("got %+v, %v; want %v", r.v, r.err, tc.wantErr)
					}
					var refused *send.Refusal
					if tc.wantCheck != "" && (!errors.As(r.err, &refused) || refused.Check != tc.wantCheck ||
						r.err.Error() != "send: "+refused.Check+" failed at "+refused.Path+": "+refused.Reason) {
						t.Fatalf("%v, want a refusal at %s in the package's words", r.err, tc.wantCheck)
					}
					continue
				}
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.v.IntentID != "intent-0001" || r.v.SignedBy != tc.signedBy || !slices.Equal(r.v.NotChecked, tc.notChecked) ||
					!strings.HasPrefix(r.v.RequestDigest, "sha256:") {
					t.Fatalf("verdict %+v", r.v)
				}
				var notAfter time.Time // zero for an unsigned approval
				if string(tc.docs.Approval) == string(signed.Original.Approval) {
					notAfter = scenario.ApprovedAt.Add(time.Hour)
				}
				if !r.v.NotAfter.Equal(notAfter) {
					t.Fatalf("the verdict's NotAfter is %v, want %v", r.v.NotAfter, notAfter)
				}
			}
		})
	}
}

func TestAnEnvelopeNamesTheIntentAnExecutorReads(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		docs send.Documents
		want string
	}{
		{"a well-formed message names its request's intent", docs(s.Original), "intent-0001"},
		{"a message whose candidate has a duplicate member names none, as the executor reads it",
			send.Documents{Candidate: []byte(`{"a":1,"a":2}`), Request: s.Original.Request, Approval: s.Original.Approval}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := send.Build(tc.docs)
			if err != nil {
				t.Fatal(err)
			}
			if got := env.IntentID(); got != tc.want {
				t.Fatalf("intent %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := send.Build(send.Documents{Candidate: []byte(`{`), Request: s.Original.Request}); err == nil {
		t.Fatal("a candidate that is not JSON was laid in an envelope")
	}
}

// Bytes is the message as it will be published: changing what it returned
// changes nothing of the envelope.
func TestAnEnvelopesBytesAreTheCallersCopy(t *testing.T) {
	env := parsed(t)
	b := env.Bytes()
	want := string(b)
	for i := range b {
		b[i] = 'x'
	}
	if got := string(env.Bytes()); got != want {
		t.Fatalf("after the caller changed what Bytes returned, Bytes is %.40q..., want the message", got)
	}
}

func TestAReceiptReadsNullMembersAsEmpty(t *testing.T) {
	for _, tc := range []struct {
		file    string
		outcome send.Outcome
		task    string
		counts  bool
	}{
		{"created.json", send.Created, "fake-task-0001", true},
		{"rejected.json", send.Rejected, "", false},
		{"dead_lettered.json", send.DeadLettered, "", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := receiptFixture(t, tc.file)
			r, err := send.ParseReceipt(b)
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tc.outcome || r.TaskID != tc.task || (r.Counts != nil) != tc.counts || string(r.Raw) != string(b) {
				t.Fatalf("receipt %+v", r)
			}
			if (r.Rejection != nil) != (tc.outcome == send.Rejected) || (r.Failure != nil) != (tc.outcome == send.DeadLettered) {
				t.Fatalf("rejection %v, failure %v for %s", r.Rejection, r.Failure, tc.outcome)
			}
		})
	}
}

func TestAWaitWithoutAnExecutorEndsWithErrNoReceiptAndEachPublishIsANewMessage(t *testing.T) {
	env := testenv.Start(t)
	e := built(t)
	c := send.NewClient(env.JS)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := c.Publish(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Publish(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if first.StreamSeq == second.StreamSeq || first.MsgID == second.MsgID || second.Duplicate ||
		first.Subject != "approvals.default.intent-0001" || first.IntentID != "intent-0001" {
		t.Fatalf("two publishes: %+v and %+v; want two messages on approvals.default.intent-0001", first, second)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer wcancel()
	if r, err := c.WaitReceipt(wctx, first); r != nil || !errors.Is(err, send.ErrNoReceipt) {
		t.Fatalf("got %v, %v; want ErrNoReceipt", r, err)
	}
}

func TestAStoredEnvelopeIsSentAgainByteForByteAndAnythingElseIsRefused(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	stored := s.Original.Envelope()
	env, err := send.ParseEnvelope(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.Bytes(), stored) {
		t.Fatalf("the parsed envelope's bytes differ from the stored ones")
	}
	if got := env.IntentID(); got != "intent-0001" {
		t.Fatalf("intent %q, want intent-0001", got)
	}
	for name, data := range map[string][]byte{
		"not JSON":                    []byte(`{`),
		"a document, not an envelope": s.Original.Request,
		"another schema version":      bytes.Replace(stored, []byte(`task-envelope.v1`), []byte(`task-envelope.v2`), 1),
	} {
		if _, err := send.ParseEnvelope(data); !errors.Is(err, send.ErrNotEnvelope) {
			t.Errorf("%s: %v, want ErrNotEnvelope", name, err)
		}
	}
}

// LoadTrustedApprovers speaks for itself: its errors carry one package
// prefix, send's, with the path and the cause (the OS error of a file that
// cannot be read, the reason a malformed one is refused).
func TestLoadTrustedApproversErrorsAreSendsOwn(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"approvers": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		is   error
		says string
	}{
		{missing, fs.ErrNotExist, "no such file"},
		{malformed, send.ErrInvalid, "names no approvers"},
	} {
		_, err := send.LoadTrustedApprovers(c.path)
		if err == nil {
			t.Fatalf("%s: loaded", c.path)
		}
		msg := err.Error()
		if !errors.Is(err, c.is) || !strings.HasPrefix(msg, "send: ") ||
			strings.Contains(msg[len("send: "):], "send: ") || strings.Contains(msg, "sign: ") ||
			!strings.Contains(msg, c.path) || !strings.Contains(msg, c.says) {
			t.Errorf("loading %s: %q; want it to match %v, start with the one prefix \"send: \", name the path and say %q", c.path, msg, c.is, c.says)
		}
	}
}

// The check names are written out in send (so that go doc shows them);
// they must be the gate's, in the gate's order.
func TestTheCheckConstantsAreTheGatesChecksInOrder(t *testing.T) {
	ours := []string{send.CheckEnvelope, send.CheckApprovalFormat, send.CheckSignature, send.CheckExpiry,
		send.CheckCandidateBinding, send.CheckRequestBinding, send.CheckCapability, send.CheckDestination, send.CheckScope}
	if !slices.Equal(ours, gate.Checks) {
		t.Fatalf("send's checks %q, the gate's %q", ours, gate.Checks)
	}
}

// The outcomes a receipt carries are the ones the executors write.
func TestTheOutcomesAreTheReceiptsOwn(t *testing.T) {
	for _, c := range []struct {
		ours   send.Outcome
		theirs string
	}{
		{send.Created, document.OutcomeCreated}, {send.Replayed, document.OutcomeReplayed}, {send.Conflict, document.OutcomeConflict},
		{send.Rejected, document.OutcomeRejected}, {send.DeadLettered, document.OutcomeDeadLettered},
	} {
		if string(c.ours) != c.theirs || !document.Terminal(string(c.ours)) {
			t.Errorf("send's %q, the receipt's %q", c.ours, c.theirs)
		}
	}
	var _ taskservice.Outcome = send.Created // one type
}

// Every error of the package's own functions starts "send: ", matches one
// of its sentinels and carries none of the module's internal types.
func TestErrorsAreThePackagesOwn(t *testing.T) {
	_, buildErr := send.Build(send.Documents{Candidate: []byte("{"), Request: []byte("{}"), Approval: []byte("{}")})
	_, parseErr := send.ParseEnvelope([]byte(`{"not":"an envelope"}`))
	_, receiptErr := send.ParseReceipt([]byte(`{"schema_version":"task-receipt.v1"}`))
	_, refusal := send.Bindings().Documents(send.Documents{Candidate: []byte("{}"), Request: []byte("{}"), Approval: []byte("{}")})
	_, timeErr := send.ParseReceipt([]byte(strings.Replace(string(receiptFixture(t, "created.json")), `"issued_at": "2026`, `"issued_at": "yesterday 2026`, 1)))
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Build of a document that is not JSON", buildErr, send.ErrInvalid},
		{"ParseEnvelope of what is not an envelope", parseErr, send.ErrNotEnvelope},
		{"ParseEnvelope of what is not an envelope", parseErr, send.ErrInvalid},
		{"ParseReceipt of what is not a receipt", receiptErr, send.ErrBadReceipt},
		{"ParseReceipt of a receipt whose issued_at is no time", timeErr, send.ErrBadReceipt},
		{"a local check's refusal", refusal, send.ErrRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.want) || !strings.HasPrefix(fmt.Sprint(c.err), "send: ") {
				t.Fatalf("%v; want one that starts send: and matches %v", c.err, c.want)
			}
			var de *document.Error
			var ge *gate.Error
			if errors.As(c.err, &de) || errors.As(c.err, &ge) {
				t.Fatalf("%v carries an internal type", c.err)
			}
		})
	}
}

// receiptFixture is the receipt testdata/receipts/name.
func receiptFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "receipts", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A receipt's times are times.
func TestAReceiptsTimesAreTimes(t *testing.T) {
	r, err := send.ParseReceipt(receiptFixture(t, "created.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.IssuedAt.IsZero() || r.Outcome != send.Created || r.Counts == nil {
		t.Fatalf("receipt %+v", r)
	}
}

// A receipt's trace_id is its TraceID; one without it has none.
func TestAReceiptNamesTheTraceItWasIssuedIn(t *testing.T) {
	b := receiptFixture(t, "created.json")
	if r, err := send.ParseReceipt(b); err != nil || r.TraceID != "" {
		t.Fatalf("a receipt without trace_id: TraceID %q, err %v", r.TraceID, err)
	}
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := bytes.Replace(b, []byte(`"outcome"`), []byte(`"trace_id":"`+id+`","outcome"`), 1)
	r, err := send.ParseReceipt(traced)
	if err != nil || r.TraceID != id {
		t.Fatalf("a receipt with trace_id %s: TraceID %q, err %v", id, r.TraceID, err)
	}
}

// A tenant that sends messages as large as it can, 250 KiB as the stream
// took before, has them refused by the APPROVALS stream itself: the stream
// takes the largest valid envelope and a message at its bound, refuses one
// byte more, and the SDK's error names the bound.
func TestAMessageLargerThanAnyValidEnvelopeIsRefusedByTheStream(t *testing.T) {
	largest, err := scenario.Largest()
	if err != nil {
		t.Fatal(err)
	}
	e, err := send.ParseEnvelope(largest.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := send.NewClient(env.JS).Publish(ctx, e); err != nil {
		t.Fatalf("the largest valid envelope was not stored: %v", err)
	}
	// A bare publish carries no headers: the bound is the body's.
	subject := subjects.Approval("", "intent-0001")
	if _, err := env.JS.Publish(ctx, subject, bytes.Repeat([]byte("x"), topology.ApprovalMaxMsg)); err != nil {
		t.Fatalf("a message at the bound was refused: %v", err)
	}
	stored := lastSeq(t, env.JS)
	for _, size := range []int{topology.ApprovalMaxMsg + 1, 250 << 10} {
		_, err := env.JS.Publish(ctx, subject, bytes.Repeat([]byte("x"), size))
		var api *jetstream.APIError
		if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum {
			t.Errorf("a %d-byte message: %v; want the stream's refusal of a message over its maximum", size, err)
		}
	}
	_, err = send.NewClient(env.JS).Publish(ctx, send.Unchecked(bytes.Repeat([]byte("x"), 250<<10)))
	if !errors.Is(err, send.ErrNotPublished) || !strings.Contains(err.Error(), "larger than any valid envelope (at most 86016 bytes") {
		t.Errorf("publishing 250 KiB through the SDK: %v; want ErrNotPublished naming the bound", err)
	}
	if n := lastSeq(t, env.JS); n != stored {
		t.Errorf("the stream holds %d messages after the refusals, want %d", n, stored)
	}
}

// A publish is taken for stored only when APPROVALS or the scope's intake
// stream acknowledged it, and an intake's approval only once APPROVALS
// holds the copy it sourced: its APPROVALS sequence is what the receipts
// name.
func TestAnApprovalStoredAnywhereButApprovalsOrItsIntakeIsNotTakenForSent(t *testing.T) {
	intake := topology.IntakeStream(subjects.ScopeToken(""))
	for _, tc := range []struct{ stream, want string }{
		{"OTHER", `stored by stream "OTHER" as message 1, which is neither APPROVALS nor the scope's intake stream ` + intake},
		{intake, "stored by " + intake + " as message 1, not yet seen in APPROVALS"},
	} {
		t.Run(tc.stream, func(t *testing.T) {
			js := testenv.JetStream(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: tc.stream, Subjects: []string{"approvals.>"}}); err != nil {
				t.Fatal(err)
			}
			e, err := send.ParseEnvelope(envelope(t))
			if err != nil {
				t.Fatal(err)
			}
			_, err = send.NewClient(js).Publish(ctx, e, send.Timeout(time.Second))
			if !errors.Is(err, send.ErrNotPublished) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("publish: %v, want ErrNotPublished saying %q", err, tc.want)
			}
		})
	}
}
