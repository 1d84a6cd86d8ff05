package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

// advice is what a dead_lettered send must say besides the failure.
var advice = []string{"whether the task was created is unknown", "sending the same approval again is safe and will say"}

func TestADeadLetteredReceiptReadsAsAnUnknownOutcomeThatIsSafeToResend(t *testing.T) {
	t.Parallel()
	rc, err := send.ParseReceipt(readFile(t, "../../testdata/receipts/dead_lettered.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	publish.PrintReceipt(&out, rc)
	text := out.String()
	for _, want := range append([]string{"dead_lettered after 5 attempt(s): task service call failed on delivery 5 of 5"}, advice...) {
		if !strings.Contains(text, want) {
			t.Errorf("the dead_lettered receipt reads without %q:\n%s", want, text)
		}
	}
}

// A dead letter the task service refused for good, knowing it created
// nothing or not, reads as a refusal to fix, never as safe to send again.
func TestADeadLetterRefusedForGoodNeverSaysThatSendingAgainIsSafe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, reason, ending string }{
		{"a refusal that created nothing", "task service refused the call: caldav: a task with the UID this intent's task would have is already in the collection",
			document.DeadLetterNothingCreated},
		{"a refusal of a call that may have created a task", "task service refused the call: redmine: two issues carry this intent's mark",
			document.DeadLetterRefused},
		{"a key the task service held in doubt on every delivery", "the task service still held the key in doubt (until 2026-11-27T10:06:00Z) on delivery 22",
			document.DeadLetterInDoubt},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc, err := send.ParseReceipt(readFile(t, "../../testdata/receipts/dead_lettered.json"))
			if err != nil {
				t.Fatal(err)
			}
			rc.Failure.Reason = c.reason + "; " + c.ending
			if rc.Failure.OutcomeUnknown() {
				t.Errorf("Failure.OutcomeUnknown holds for %q", rc.Failure.Reason)
			}
			var out bytes.Buffer
			publish.PrintReceipt(&out, rc)
			text := out.String()
			if !strings.Contains(text, c.ending) {
				t.Errorf("the receipt reads without its reason's ending:\n%s", text)
			}
			for _, unwanted := range append([]string{"again is safe"}, advice...) {
				if strings.Contains(text, unwanted) {
					t.Errorf("the receipt still says %q:\n%s", unwanted, text)
				}
			}
		})
	}
}

// What the task service said about its answer is printed with the
// receipt; a receipt without a note prints none.
func TestTheTaskServicesNoteIsPrintedWithTheReceipt(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"idempotency_conflict.json": "  the task service says: the intent ledger holds this key for another request digest\n",
		"created.json":              "",
	} {
		rc, err := send.ParseReceipt(readFile(t, "../../testdata/receipts/"+file))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		publish.PrintReceipt(&out, rc)
		if got := out.String(); want != "" && !strings.Contains(got, want) || want == "" && strings.Contains(got, "says:") {
			t.Errorf("%s prints\n%s\nwant the note %q", file, got, want)
		}
	}
}

func TestSendWithTheTaskServiceDownSaysTheOutcomeIsUnknownAndTheResendSaysCreated(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", CallTimeout: 200 * time.Millisecond})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "45s")...)
	r.expect(t, exitDead)
	for _, want := range append([]string{"dead_lettered after 4 attempt(s)"}, advice...) {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("send printed without %q:\n%s", want, r.stdout)
		}
	}
	env.RestartService("provider")
	again := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "45s")...)
	again.expect(t, exitOK)
	if !strings.HasPrefix(again.stdout, "created: task fake-task-0001 for intent intent-0001") {
		t.Errorf("the resend printed:\n%s", again.stdout)
	}
}

func TestSendHelpSaysOnlyAnUnknownOutcomeIsSafeToResend(t *testing.T) {
	t.Parallel()
	r := publisher(t, nil, "send", "--help")
	r.expect(t, exitOK)
	help := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
	for _, want := range []string{
		"5 dead_lettered (its reason says which: deliveries ran out, whether the task was created is unknown, and sending again is safe and will say;",
		"or the task service refused the call for good, and sending again is refused the same way until the cause is fixed)",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("send --help lacks %q:\n%s", want, help)
		}
	}
}

// A send waits for its receipt without a consumer: as a user that may
// create none, and on a server whose RECEIPTS stream has no consumer left
// to give, it sends twice and prints created, then replayed.
func TestSendWaitsForItsReceiptWithoutAConsumer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (env *testenv.Env, url string)
	}{
		{"as a publisher that may create no consumer", func(t *testing.T) (*testenv.Env, string) {
			env := testenv.StartNoConsumers(t)
			return env, env.PublisherURL()
		}},
		{"while RECEIPTS has used up its consumers", func(t *testing.T) (*testenv.Env, string) {
			env := testenv.Start(t)
			env.LimitConsumers(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := env.JS.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "squatter"}); err != nil {
				t.Fatal(err)
			}
			if _, err := env.JS.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{Durable: "another"}); err == nil {
				t.Fatal("RECEIPTS took a second consumer past its limit of one")
			}
			return env, env.URL()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, url := tc.start(t)
			env.Executor(executor.Config{ID: "exec-1"})
			for _, want := range []string{"created: task fake-task-0001", "replayed: the same task fake-task-0001"} {
				r := publisher(t, nil, seedOriginal.args("send", "--server", url, "--wait", "30s")...)
				r.expect(t, exitOK)
				if !strings.HasPrefix(r.stdout, want) {
					t.Fatalf("send printed %q, want %q first\nstderr:\n%s", r.stdout, want, r.stderr)
				}
			}
		})
	}
}

// A send that published but whose wait fails, for whatever reason, says
// that the message was published and that sending again is safe, and ends
// with status 6; the message is stored.
func TestSendThatPublishedButGotNoReceiptSaysSoAndEndsWith6(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With the RECEIPTS stream gone, no receipt can be read.
	if err := env.JS.DeleteStream(ctx, topology.ReceiptsStream); err != nil {
		t.Fatal(err)
	}
	before := approvalsState(t, env)
	r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "2s")...)
	r.expect(t, exitNoAnswer)
	after := approvalsState(t, env)
	if after.LastSeq != before.LastSeq+1 {
		t.Fatalf("APPROVALS went from %d to %d messages; want the one sent", before.LastSeq, after.LastSeq)
	}
	for _, want := range []string{fmt.Sprintf("published as APPROVALS message %d; no receipt: ", after.LastSeq),
		"no stream RECEIPTS allowing direct gets answers $JS.API.DIRECT.GET.RECEIPTS.receipts.default.intent-0001",
		"sending again is safe"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// approvalsState reads the APPROVALS stream's state.
func approvalsState(t *testing.T, env *testenv.Env) jetstream.StreamState {
	t.Helper()
	return testenv.StreamState(t, env.JS, topology.ApprovalsStream)
}

func receipt(t *testing.T, r result) *document.Receipt {
	t.Helper()
	rc, err := document.DecodeReceipt([]byte(r.stdout))
	if err != nil {
		t.Fatalf("standard output is not a task-receipt.v1: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return rc
}

func orNull(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func counts(c *document.Counts) string {
	if c == nil {
		return "<null>"
	}
	return fmt.Sprintf("%d, %d, %d", c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
}

func TestTwoPublisherProcessesSendTheSameApproval(t *testing.T) {
	for _, asJSON := range []bool{true, false} {
		form := "readable"
		if asJSON {
			form = "JSON"
		}
		t.Run("created, then replayed with the same task and counters 2, 1, 1 ("+form+")", func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t)
			env.Executor(executor.Config{ID: "exec-1"})
			args := seedOriginal.args("send", "--server", env.URL(), "--wait", "30s")
			if asJSON {
				args = append(args, "--json")
			}
			first := publisher(t, nil, args...)
			first.expect(t, 0)
			second := publisher(t, nil, args...)
			second.expect(t, 0)

			if asJSON {
				r1, r2 := receipt(t, first), receipt(t, second)
				if r1.Outcome != document.OutcomeCreated || r2.Outcome != document.OutcomeReplayed {
					t.Fatalf("outcomes %s then %s, want created then replayed", r1.Outcome, r2.Outcome)
				}
				if orNull(r1.TaskID) != "fake-task-0001" || orNull(r2.TaskID) != orNull(r1.TaskID) {
					t.Errorf("task ids %s then %s, want fake-task-0001 both times", orNull(r1.TaskID), orNull(r2.TaskID))
				}
				if counts(r1.Counts) != "1, 1, 1" || counts(r2.Counts) != "2, 1, 1" {
					t.Errorf("counters %s then %s, want 1, 1, 1 then 2, 1, 1", counts(r1.Counts), counts(r2.Counts))
				}
				if r1.Delivery.StreamSeq == r2.Delivery.StreamSeq {
					t.Errorf("both receipts are for stream message %d: the resend was not a message of its own", r1.Delivery.StreamSeq)
				}
				for _, r := range []*document.Receipt{r1, r2} {
					if orNull(r.IntentID) != "intent-0001" || orNull(r.RequestID) != "task-request-0001" ||
						orNull(r.ApprovalID) != "approval-0001" || r.Delivery.Executor != "exec-1" {
						t.Errorf("receipt names intent %s, request %s, approval %s, executor %s",
							orNull(r.IntentID), orNull(r.RequestID), orNull(r.ApprovalID), r.Delivery.Executor)
					}
				}
			} else {
				for _, c := range []struct {
					r    result
					want []string
				}{
					{first, []string{"created: task fake-task-0001 for intent intent-0001", "requests received 1, creates executed 1, tasks existing 1"}},
					{second, []string{"replayed: the same task fake-task-0001 for intent intent-0001; nothing new was created",
						"requests received 2, creates executed 1, tasks existing 1", "executor exec-1"}},
				} {
					for _, w := range c.want {
						if !strings.Contains(c.r.stdout, w) {
							t.Errorf("output lacks %q:\n%s", w, c.r.stdout)
						}
					}
				}
			}
			if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
				t.Errorf("the service counts %+v, want 2, 1, 1", c)
			}
			if n := approvalsState(t, env).Msgs; n != 2 {
				t.Errorf("the APPROVALS stream holds %d messages, want 2", n)
			}
		})
	}
}

func TestSendWithAChangedRequestForTheSameIntentIsAConflict(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", "30s")...).expect(t, 0)

	r := publisher(t, nil, seedChanged.args("send", "--server", env.URL(), "--wait", "30s", "--json")...)
	r.expect(t, 3)
	rc := receipt(t, r)
	if rc.Outcome != document.OutcomeConflict || orNull(rc.TaskID) != "fake-task-0001" || counts(rc.Counts) != "2, 1, 1" {
		t.Fatalf("receipt %s, task %s, counters %s; want idempotency_conflict, fake-task-0001, 2, 1, 1",
			rc.Outcome, orNull(rc.TaskID), counts(rc.Counts))
	}
	readable := publisher(t, nil, seedChanged.args("send", "--server", env.URL(), "--wait", "30s")...)
	readable.expect(t, 3)
	if !strings.Contains(readable.stdout, "idempotency_conflict: intent intent-0001 already created task fake-task-0001") {
		t.Errorf("output lacks the conflict:\n%s", readable.stdout)
	}
}

func TestSendOfATamperedMessage(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	cases, refusals := tampered(t)
	for _, tc := range cases {
		if tc.Name == "no-approval" {
			continue // send needs --approval
		}
		f := splitTampered(t, tc)
		t.Run(tc.Name+" fails the local gate and publishes nothing", func(t *testing.T) {
			before := approvalsState(t, env)
			r := publisher(t, nil, f.args("send", "--server", env.URL(), "--wait", "30s", "--json")...)
			r.expect(t, 1)
			for _, s := range []string{"nothing published", tc.Check, refusals[tc.Name].Path} {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("standard output holds %q", r.stdout)
			}
			if after := approvalsState(t, env); after.Msgs != before.Msgs || after.LastSeq != before.LastSeq {
				t.Errorf("the APPROVALS stream went from %d messages (last %d) to %d (last %d)",
					before.Msgs, before.LastSeq, after.Msgs, after.LastSeq)
			}
		})
		t.Run(tc.Name+" as a stored envelope fails the same local gate and publishes nothing", func(t *testing.T) {
			before := approvalsState(t, env)
			r := publisher(t, nil, "send", "--envelope", writeEnvelope(t, tc.Envelope), "--server", env.URL(), "--wait", "30s")
			r.expect(t, exitFailure)
			for _, s := range []string{"nothing published", tc.Check, refusals[tc.Name].Path} {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if after := approvalsState(t, env); after.LastSeq != before.LastSeq {
				t.Errorf("the APPROVALS stream went from message %d to %d", before.LastSeq, after.LastSeq)
			}
		})
		t.Run(tc.Name+" sent with --no-check is rejected at "+tc.Check+" by the executor", func(t *testing.T) {
			before := approvalsState(t, env)
			r := publisher(t, nil, f.args("send", "--server", env.URL(), "--wait", "30s", "--json", "--no-check")...)
			r.expect(t, 4)
			rc := receipt(t, r)
			if rc.Outcome != document.OutcomeRejected || rc.Rejection == nil || rc.Rejection.Check != tc.Check {
				t.Fatalf("receipt %s, rejection %+v; want rejected at %s", rc.Outcome, rc.Rejection, tc.Check)
			}
			if rc.Rejection.Path != refusals[tc.Name].Path {
				t.Errorf("rejected at path %s, the local gate names %s", rc.Rejection.Path, refusals[tc.Name].Path)
			}
			if rc.Counts != nil || rc.TaskID != nil {
				t.Errorf("a rejected receipt names counters %s or task %s", counts(rc.Counts), orNull(rc.TaskID))
			}
			if after := approvalsState(t, env); after.LastSeq != before.LastSeq+1 || rc.Delivery.StreamSeq != after.LastSeq {
				t.Errorf("published as message %d; the stream went from %d to %d", rc.Delivery.StreamSeq, before.LastSeq, after.LastSeq)
			}
		})
	}
	t.Run("a readable rejection names the check and the path", func(t *testing.T) {
		for _, tc := range cases {
			if tc.Name != "request-edited-after-approval" {
				continue
			}
			r := publisher(t, nil, splitTampered(t, tc).args("send", "--server", env.URL(), "--wait", "30s", "--no-check")...)
			r.expect(t, 4)
			stored := publisher(t, nil, "send", "--envelope", writeEnvelope(t, tc.Envelope), "--server", env.URL(), "--wait", "30s", "--no-check")
			stored.expect(t, 4)
			for _, out := range []string{r.stdout, stored.stdout} {
				if !strings.Contains(out, "rejected at request_binding ($.request):") {
					t.Errorf("output lacks the rejection:\n%s", out)
				}
			}
		}
	})
	if c := env.Counts(); c.RequestsReceived != 0 || c.CreatesExecuted != 0 || c.TasksExisting != 0 {
		t.Errorf("the service counts %+v; it must never hear of a tampered message", c)
	}
}

func TestSendWaitsInVainWithoutAnExecutor(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t) // no executor
	for _, c := range []struct {
		wait    string
		atLeast time.Duration
	}{{"1s", time.Second}, {"1ns", 0}} {
		t.Run("--wait "+c.wait+" ends with status 6 and says sending again is safe", func(t *testing.T) {
			before := approvalsState(t, env)
			r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--wait", c.wait)...)
			r.expect(t, 6)
			if r.took < c.atLeast {
				t.Errorf("ended after %s, before the wait of %s", r.took, c.wait)
			}
			for _, s := range []string{"published as APPROVALS message", "no receipt: none within " + c.wait, "sending again is safe"} {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if after := approvalsState(t, env); after.LastSeq != before.LastSeq+1 {
				t.Errorf("the stream went from %d to %d messages; want one published", before.LastSeq, after.LastSeq)
			}
		})
	}
	t.Run("without --wait it reports the stream message and succeeds", func(t *testing.T) {
		r := publisher(t, nil, seedOriginal.args("send", "--server", env.URL(), "--json")...)
		r.expect(t, 0)
		var got struct {
			Published bool   `json:"published"`
			StreamSeq uint64 `json:"stream_seq"`
			Subject   string `json:"subject"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("stdout %q: %v", r.stdout, err)
		}
		if !got.Published || got.StreamSeq != approvalsState(t, env).LastSeq || got.Subject != subjects.Approval("", "intent-0001") {
			t.Errorf("printed %+v", got)
		}
	})
	if c := env.Counts(); c.RequestsReceived != 0 {
		t.Errorf("the service counts %+v with no executor running", c)
	}
}

func TestSendToAServerThatIsNotThere(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nobody listens there now
	r := publisher(t, nil, seedOriginal.args("send", "--server", url, "--wait", "30s")...)
	r.expect(t, 1)
	if !strings.Contains(r.stderr, "connecting to NATS at "+url) {
		t.Errorf("stderr does not name the server:\n%s", r.stderr)
	}
	if r.took > 10*time.Second {
		t.Errorf("took %s to give up", r.took)
	}
}

// writeEnvelope writes envelope to a file of its own and returns its path.
func writeEnvelope(t *testing.T, envelope []byte) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "envelope.json", envelope)
}

func TestSendOfAStoredEnvelopeTwiceSaysCreatedThenReplayed(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	file := writeEnvelope(t, testenv.Seed(t).Original.Envelope())

	first := publisher(t, nil, "send", "--envelope", file, "--server", env.URL(), "--wait", "30s", "--json")
	first.expect(t, exitOK)
	if rc := receipt(t, first); rc.Outcome != document.OutcomeCreated || orNull(rc.TaskID) != "fake-task-0001" {
		t.Fatalf("first send: %s, task %s; want created, fake-task-0001", rc.Outcome, orNull(rc.TaskID))
	}
	second := publisher(t, nil, "send", "--envelope", file, "--server", env.URL(), "--wait", "30s")
	second.expect(t, exitOK)
	for _, want := range []string{"replayed: the same task fake-task-0001 for intent intent-0001",
		"requests received 2, creates executed 1, tasks existing 1", "local gate passed"} {
		if !strings.Contains(second.stdout+second.stderr, want) {
			t.Errorf("the second send lacks %q:\n%s%s", want, second.stdout, second.stderr)
		}
	}
	if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("the task service counts %+v, want 2, 1, 1", c)
	}
}

func TestSendTakesExactlyOneFormAndAnEnvelopeThatIsOne(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t) // no executor: a published message gets no receipt
	s := testenv.Seed(t)
	envelope := writeEnvelope(t, s.Original.Envelope())
	request := writeEnvelope(t, s.Original.Request)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"an envelope and the documents together is a usage error",
			seedOriginal.args("send", "--envelope", envelope), exitUsage, "--envelope and --candidate/--request/--approval exclude each other"},
		{"an envelope and one document is a usage error",
			[]string{"send", "--envelope", envelope, "--approval", seedFile("approval.json")}, exitUsage, "exclude each other"},
		{"neither form is a usage error naming both", []string{"send"}, exitUsage, "give --candidate FILE, --request FILE and --approval FILE, or --envelope FILE"},
		{"a missing envelope file publishes nothing", []string{"send", "--envelope", envelope + ".missing"}, exitFailure, "nothing published: reading the envelope"},
		{"a task request given as the envelope publishes nothing", []string{"send", "--envelope", request}, exitFailure, "not a task-envelope.v1 message"},
		{"an envelope published without a receipt within --wait ends with status 6",
			[]string{"send", "--envelope", envelope, "--wait", "500ms"}, exitNoAnswer, "no receipt: none within 500ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := approvalsState(t, env)
			r := publisher(t, nil, append(c.args, "--server", env.URL())...)
			r.expect(t, c.code)
			if !strings.Contains(strings.Join(strings.Fields(r.stderr), " "), c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			want := uint64(0)
			if c.code == exitNoAnswer {
				want = 1
			}
			if published := approvalsState(t, env).LastSeq - before.LastSeq; published != want {
				t.Errorf("%d messages published, want %d", published, want)
			}
		})
	}
}
