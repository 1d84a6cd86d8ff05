package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
	"github.com/sendtwice/sendtwice/send"
)

func TestTheDemosSenderProcessIsPublisherSendAndItsReceiptIsReadWhateverItsStatus(t *testing.T) {
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1"})
	s := testenv.Seed(t)
	for _, c := range []struct {
		name     string
		envelope []byte
		want     string
	}{
		{"the first send is created (status 0)", s.Original.Envelope(), document.OutcomeCreated},
		{"the same approval from a second process is replayed (status 0)", s.Original.Envelope(), document.OutcomeReplayed},
		{"a changed request for the intent is a conflict (status 3), and its receipt still read", s.Changed.Envelope(), document.OutcomeConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := sendByProcess(t, env.URL(), c.envelope)
			if rc.Outcome != c.want || rc.TaskID == nil || *rc.TaskID != "fake-task-0001" {
				t.Fatalf("receipt %s, task %v; want %s, fake-task-0001", rc.Outcome, rc.TaskID, c.want)
			}
		})
	}
	if c := env.Counts(); c.RequestsReceived != 3 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("the task service counts %+v, want 3, 1, 1", c)
	}
}

func TestTheExecutorHasNoSendCommandAndItsUsageNamesNone(t *testing.T) {
	_, _, err := runCLI(context.Background(), "send", "--envelope", "envelope.json")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown command "send"`) {
		t.Errorf("executor send: %v (exit %d), want an unknown command", err, exitCode(err))
	}
	usage, _, err := runCLI(context.Background(), "--help")
	if err != nil || strings.Contains(usage, "executor send") || strings.Contains(usage, demoSenderEnv) {
		t.Errorf("executor --help: %v\n%s", err, usage)
	}
}

func TestRedriveHelpExplainsTheCommandAndTheUsageListsIt(t *testing.T) {
	out, errOut, err := runCLI(context.Background(), "redrive", "--help")
	if exitCode(err) != 0 {
		t.Fatalf("redrive --help: %v", err)
	}
	expectLines(t, "redrive --help", strings.Join(strings.Fields(errOut+out), " "),
		"redrive (--seq N | --all)", "new message id", "Sendtwice-Redrive-Of", "created when no earlier attempt reached the service and replayed when one did",
		"--force", "-dry-run", "Exit status: 0")
	usage, _, err := runCLI(context.Background(), "--help")
	if err != nil || !strings.Contains(usage, "executor redrive (--seq N | --all)") {
		t.Errorf("executor --help does not list redrive: %v\n%s", err, usage)
	}
}

// deadLetter publishes each envelope and waits until it is dead-lettered;
// the caller has made the task service fail. It returns the sends.
func deadLetter(t *testing.T, env *testenv.Env, envelopes ...[]byte) []send.Sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sends []send.Sent
	for _, e := range envelopes {
		sent, err := testenv.Publish(ctx, env.JS, e)
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, sent)
	}
	for _, sent := range sends {
		if rc := receiptFor(t, env.JS, sent.IntentID, sent.StreamSeq); rc.Outcome != document.OutcomeDeadLettered {
			t.Fatalf("message %d: receipt %s, want dead_lettered", sent.StreamSeq, rc.Outcome)
		}
	}
	return sends
}

// outageStack starts a stack and an executor, dead-letters the given
// envelopes while the task service is down, and brings the service back.
func outageStack(t *testing.T, envelopes ...[]byte) (*testenv.Env, []send.Sent) {
	t.Helper()
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", CallTimeout: 200 * time.Millisecond})
	if err := env.Stack.StopService(); err != nil {
		t.Fatal(err)
	}
	sends := deadLetter(t, env, envelopes...)
	env.RestartService("provider")
	return env, sends
}

func seedScenario(t *testing.T) *scenario.Seed {
	t.Helper()
	s := testenv.Seed(t)
	return s
}

// redriveCmd runs "executor redrive" with args against env.
func redriveCmd(env *testenv.Env, args ...string) (stdout, stderr string, err error) {
	return runCLI(context.Background(), append([]string{"redrive", "--server", env.URL()}, args...)...)
}

// redriveAll runs redrive --all and fails the test unless it succeeds and
// adds exactly added messages to APPROVALS (as want says); it returns what
// redrive printed.
func redriveAll(t *testing.T, env *testenv.Env, added uint64, want string) string {
	t.Helper()
	before := approvalsLastSeq(t, env)
	out, errOut, err := redriveCmd(env, "--all", "--wait", "30s")
	if err != nil {
		t.Fatalf("redrive --all: %v\n%s%s", err, out, errOut)
	}
	if after := approvalsLastSeq(t, env); after != before+added {
		t.Fatalf("APPROVALS went from %d to %d, want %s:\n%s", before, after, want, out)
	}
	return out
}

func approvalsLastSeq(t *testing.T, env *testenv.Env) uint64 {
	t.Helper()
	return testenv.StreamState(t, env.JS, topology.ApprovalsStream).LastSeq
}

func approvalMsg(t *testing.T, env *testenv.Env, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := env.JS.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatalf("reading approvals message %d: %v", seq, err)
	}
	return m
}

func TestARedrivenDeadLetterComesBackCreatedOnceTheServiceIsBack(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env, sends := outageStack(t, s.Original.Envelope())
	orig := approvalMsg(t, env, sends[0].StreamSeq)

	out, errOut, err := redriveCmd(env, "--seq", "1", "--wait", "30s")
	if err != nil {
		t.Fatalf("redrive: %v\n%s%s", err, out, errOut)
	}
	newSeq := approvalsLastSeq(t, env)
	for _, want := range []string{
		fmt.Sprintf("redriven: dead letter 1 (approvals message %d, intent intent-0001) as approvals message %d", sends[0].StreamSeq, newSeq),
		fmt.Sprintf("receipt: approvals message %d (dead letter 1): created, task fake-task-0001", newSeq),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("redrive printed without %q:\n%s", want, out)
		}
	}
	m := approvalMsg(t, env, newSeq)
	if !bytes.Equal(m.Data, orig.Data) {
		t.Errorf("the redriven payload differs from the original")
	}
	if m.Subject != subjects.Approval("", "intent-0001") {
		t.Errorf("redriven on %s, want %s", m.Subject, subjects.Approval("", "intent-0001"))
	}
	if got := m.Header.Get(redrive.HeaderRedriveOf); got != "1" {
		t.Errorf("%s = %q, want the dead letter's sequence 1", redrive.HeaderRedriveOf, got)
	}
	if id := m.Header.Get(jetstream.MsgIDHeader); id == "" || id == orig.Header.Get(jetstream.MsgIDHeader) {
		t.Errorf("the redrive's message id %q is not a new one (the original's is %q)", id, orig.Header.Get(jetstream.MsgIDHeader))
	}
	if c := env.Counts(); c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("counters %+v, want one create and one task", c)
	}
}

func TestARedrivenDeadLetterWhoseCallsReachedTheServiceComesBackReplayed(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env := testenv.Start(t)
	env.Executor(executor.Config{ID: "exec-1", CallTimeout: 200 * time.Millisecond})
	// Every call reaches the service and creates (once); every reply is lost.
	env.Stack.Service.DropReplies(1000)
	sends := deadLetter(t, env, s.Original.Envelope())
	env.Stack.Service.DropReplies(0)
	if c := env.Counts(); c.CreatesExecuted != 1 {
		t.Fatalf("counters %+v, want the one create of the lost replies", c)
	}
	out, errOut, err := redriveCmd(env, "--seq", "1", "--wait", "30s")
	if err != nil {
		t.Fatalf("redrive: %v\n%s%s", err, out, errOut)
	}
	if want := "created"; strings.Contains(out, ": "+want) {
		t.Errorf("the redrive was created again:\n%s", out)
	}
	if want := "(dead letter 1): replayed, task fake-task-0001"; !strings.Contains(out, want) {
		t.Errorf("redrive printed without %q:\n%s", want, out)
	}
	if c := env.Counts(); c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Errorf("counters %+v after the redrive of message %d, want still one create and one task", c, sends[0].StreamSeq)
	}
}

func TestRedriveRefusesADeadLetterAlreadyRedrivenUnlessForced(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env, _ := outageStack(t, s.Original.Envelope())
	if out, errOut, err := redriveCmd(env, "--seq", "1", "--wait", "30s"); err != nil {
		t.Fatalf("first redrive: %v\n%s%s", err, out, errOut)
	}
	first := approvalsLastSeq(t, env)

	out, _, err := redriveCmd(env, "--seq", "1")
	if exitCode(err) != 1 || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("already redriven as approvals message %d; nothing published", first)) {
		t.Fatalf("a second redrive of dead letter 1 ended with %v (exit %d), want a refusal naming message %d", err, exitCode(err), first)
	}
	if out != "" || approvalsLastSeq(t, env) != first {
		t.Fatalf("the refused redrive published something or printed %q", out)
	}

	out, errOut, err := redriveCmd(env, "--seq", "1", "--force", "--wait", "30s")
	if err != nil {
		t.Fatalf("forced redrive: %v\n%s%s", err, out, errOut)
	}
	if second := approvalsLastSeq(t, env); second != first+1 || !strings.Contains(out, "replayed, task fake-task-0001") {
		t.Fatalf("forced redrive: APPROVALS %d → %d, printed:\n%s\nwant one new message, replayed", first, second, out)
	}
}

func TestRedriveAllRepublishesEachDeadLetterOnceAndSkipsThemNextTime(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env, sends := outageStack(t, s.Original.Envelope(), s.NewIntent.Envelope())
	before := approvalsLastSeq(t, env)
	out := redriveAll(t, env, 2, "two new messages")
	// The dead letters are in the order the messages failed in.
	redriven := regexp.MustCompile(`(?m)^redriven: dead letter (\d+) \(approvals message (\d+), intent (\S+)\) as approvals message (\d+)$`).FindAllStringSubmatch(out, -1)
	if len(redriven) != 2 {
		t.Fatalf("redrive --all printed %d redrives, want 2:\n%s", len(redriven), out)
	}
	asNew := map[string]string{} // original approvals seq -> new approvals seq
	deadLetterOf := map[string]string{}
	for _, m := range redriven {
		asNew[m[2]] = m[4]
		deadLetterOf[m[2]] = m[1]
	}
	for _, sent := range sends {
		orig := fmt.Sprint(sent.StreamSeq)
		if asNew[orig] == "" {
			t.Errorf("message %d (%s) was not redriven:\n%s", sent.StreamSeq, sent.IntentID, out)
		}
	}
	if asNew[fmt.Sprint(sends[0].StreamSeq)] == asNew[fmt.Sprint(sends[1].StreamSeq)] {
		t.Errorf("both dead letters name one new message:\n%s", out)
	}
	if n := strings.Count(out, ": created, task "); n != 2 {
		t.Errorf("%d created receipts printed, want 2:\n%s", n, out)
	}

	out, errOut, err := redriveCmd(env, "--all")
	if err != nil {
		t.Fatalf("second redrive --all: %v\n%s%s", err, out, errOut)
	}
	if after := approvalsLastSeq(t, env); after != before+2 {
		t.Fatalf("the second redrive --all published again (APPROVALS at %d):\n%s", after, out)
	}
	for _, sent := range sends {
		orig := fmt.Sprint(sent.StreamSeq)
		want := fmt.Sprintf("skipped: dead letter %s (approvals message %s, intent %s) was already redriven as approvals message %s",
			deadLetterOf[orig], orig, sent.IntentID, asNew[orig])
		if !strings.Contains(out, want) {
			t.Errorf("the second redrive --all printed without %q:\n%s", want, out)
		}
	}
}

func TestRedriveDryRunListsTheDeadLettersAndPublishesNothing(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env, sends := outageStack(t, s.Original.Envelope())
	before := approvalsLastSeq(t, env)
	out, errOut, err := redriveCmd(env, "--all", "--dry-run", "--json")
	if err != nil {
		t.Fatalf("redrive --dry-run: %v\n%s%s", err, out, errOut)
	}
	if after := approvalsLastSeq(t, env); after != before {
		t.Fatalf("--dry-run published (APPROVALS %d → %d)", before, after)
	}
	var rep struct {
		Items []struct {
			DeadLetterSeq uint64 `json:"dead_letter_seq"`
			ApprovalSeq   uint64 `json:"approval_seq"`
			IntentID      string `json:"intent_id"`
			Reason        string `json:"reason"`
			Action        string `json:"action"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Action != "would_redrive" || rep.Items[0].DeadLetterSeq != 1 ||
		rep.Items[0].ApprovalSeq != sends[0].StreamSeq || rep.Items[0].IntentID != "intent-0001" || rep.Items[0].Reason == "" {
		t.Fatalf("--dry-run --json reported %+v", rep.Items)
	}
}

func TestRedriveWithBadInputPublishesNothing(t *testing.T) {
	t.Parallel() // each waits some seconds for its dead letters
	s := seedScenario(t)
	env, _ := outageStack(t, s.Original.Envelope())
	before := approvalsLastSeq(t, env)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"both --seq and --all", []string{"--seq", "1", "--all"}, 2, "give --seq N or --all, not both"},
		{"neither --seq nor --all", nil, 2, "give --seq N (one dead letter) or --all (every dead letter)"},
		{"--seq 0", []string{"--seq", "0"}, 2, "--seq must be a dead letter's sequence, 1 or more"},
		{"--seq that is not a number", []string{"--seq", "one"}, 2, `invalid value "one" for flag -seq`},
		{"a negative --wait", []string{"--all", "--wait", "-1s"}, 2, "--wait must not be negative"},
		{"a --timeout of zero", []string{"--all", "--timeout", "0s"}, 2, "--timeout must be positive"},
		{"--dry-run with --wait", []string{"--all", "--dry-run", "--wait", "5s"}, 2, "nothing to --wait for"},
		{"an argument", []string{"--all", "7"}, 2, `unexpected argument "7"`},
		{"a dead letter that is not in the stream", []string{"--seq", "99"}, 1, "dead letter: 99 is not in the DEADLETTERS stream (it holds sequences 1 to 1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := redriveCmd(env, c.args...)
			if exitCode(err) != c.code || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Fatalf("redrive %v ended with %v (exit %d), want exit %d and %q", c.args, err, exitCode(err), c.code, c.want)
			}
			if c.code == 1 && !errors.Is(err, redrive.ErrNoDeadLetter) {
				t.Errorf("the error does not say that there is no such dead letter: %v", err)
			}
			if out != "" {
				t.Errorf("printed %q", out)
			}
			if after := approvalsLastSeq(t, env); after != before {
				t.Fatalf("APPROVALS went from %d to %d", before, after)
			}
		})
	}
}

func TestRedriveOfAnEmptyDeadLetterStreamSaysSo(t *testing.T) {
	env := testenv.Start(t)
	out, errOut, err := redriveCmd(env, "--all")
	if err != nil || !strings.Contains(out, "no dead letters to redrive") {
		t.Fatalf("redrive --all with no dead letters: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := redriveCmd(env, "--seq", "1"); !errors.Is(err, redrive.ErrNoDeadLetter) || !strings.Contains(err.Error(), "it holds no messages") {
		t.Fatalf("redrive --seq 1 with no dead letters: %v", err)
	}
}

func TestRedriveAllRepublishesAMessageWithTwoDeadLettersOnce(t *testing.T) {
	t.Parallel() // it waits some seconds for its dead letter
	s := seedScenario(t)
	env, sends := outageStack(t, s.Original.Envelope())
	// A second dead letter of the same message, as when a dead letter was
	// stored but its receipt was not and the message was dead-lettered
	// again after the duplicate window.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dls, err := redrive.List(ctx, env.JS)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %v: %v", dls, err)
	}
	again := nats.NewMsg(subjects.DeadLetter("", sends[0].IntentID))
	again.Data = dls[0].Envelope
	again.Header.Set(topology.HeaderReason, dls[0].Reason)
	again.Header.Set(topology.HeaderStreamSeq, fmt.Sprint(sends[0].StreamSeq))
	if _, err := env.JS.PublishMsg(ctx, again); err != nil {
		t.Fatal(err)
	}
	out := redriveAll(t, env, 1, "one new message")
	want := fmt.Sprintf("skipped: dead letter %d (approvals message %d, intent %s): dead letter %d of the same message is redriven",
		dls[0].Seq+1, sends[0].StreamSeq, sends[0].IntentID, dls[0].Seq)
	if !strings.Contains(out, want) {
		t.Fatalf("redrive --all printed without %q:\n%s", want, out)
	}
}

// storeDeadLetters stores n dead letters of generated approvals, each of an
// intent of its own, as an executor stores them.
func storeDeadLetters(t *testing.T, env *testenv.Env, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cand := scenario.Candidate()
	for i := 1; i <= n; i++ {
		a, err := scenario.Generate(cand, "dead", i)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(subjects.DeadLetter("", document.Identify(a.Envelope()).IntentID))
		m.Data = a.Envelope()
		m.Header.Set(topology.HeaderReason, "task service call failed")
		m.Header.Set(topology.HeaderStreamSeq, fmt.Sprint(i))
		m.Header.Set(topology.HeaderDelivered, "4")
		if _, err := env.JS.PublishMsg(ctx, m, jetstream.WithExpectStream(topology.DeadLetterStream)); err != nil {
			t.Fatal(err)
		}
	}
}

// A redrive of hundreds of dead letters with --wait, on a server that
// allows each stream three consumers, republishes every one and reports
// every receipt: the wait for its receipts opens no consumer.
func TestRedriveAllWaitsForHundredsOfReceiptsWithoutUsingUpTheConsumers(t *testing.T) {
	const deadLetters = 300
	env := testenv.Start(t)
	env.LimitConsumers(3)
	env.Executor(executor.Config{ID: "exec-1"})
	storeDeadLetters(t, env, deadLetters)

	out, errOut, runErr := redriveCmd(env, "--all", "--wait", "120s", "--json")
	var rep redrive.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("redrive --all --wait: %v; the report does not decode: %v\n%s", runErr, err, errOut)
	}
	created, firstBad := 0, ""
	for _, it := range rep.Items {
		if it.Action == "redriven" && it.Outcome == document.OutcomeCreated && it.WaitError == "" {
			created++
		} else if firstBad == "" {
			firstBad = fmt.Sprintf("dead letter %d: %s %q, wait error %q", it.DeadLetterSeq, it.Action, it.Outcome, it.WaitError)
		}
	}
	if runErr != nil || len(rep.Items) != deadLetters || created != deadLetters || rep.Error != "" {
		t.Fatalf("redrive --all --wait: %v; %d dead letters reported, %d redriven and created, error %q; want %d of each; the first other: %s",
			runErr, len(rep.Items), created, rep.Error, deadLetters, firstBad)
	}

	// The limit holds: the fourth consumer of a stream is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var refused error
	for i := 0; i < 4 && refused == nil; i++ {
		_, refused = env.JS.CreateConsumer(ctx, topology.ReceiptsStream, jetstream.ConsumerConfig{InactiveThreshold: time.Minute})
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum consumers limit reached") {
		t.Fatalf("four consumers on RECEIPTS: %v; want the fourth refused at the limit", refused)
	}
}
