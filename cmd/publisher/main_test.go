package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/subjects"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// The test binary doubles as the publisher command: a test runs it as a
// separate OS process with this variable set.
const asMain = "SENDTWICE_PUBLISHER_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

const seedDir = "../../testdata/seed"

func seedFile(name string) string { return filepath.Join(seedDir, name) }

// result is how one publisher process ended.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// publisher runs the publisher command as a separate process.
func publisher(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	// A race-enabled binary sleeps a second before it exits unless told not to;
	// a race found in the child still ends it with status 66.
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("publisher %s did not end within a minute\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running publisher %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// expect fails the test unless the process ended with code.
func (r result) expect(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func decodeApproval(t *testing.T, b []byte) *document.Approval {
	t.Helper()
	v, err := document.Parse(b)
	if err != nil {
		t.Fatalf("the approval is not strict JSON: %v\n%s", err, b)
	}
	a, err := document.DecodeApproval("$", v)
	if err != nil {
		t.Fatalf("the approval does not decode: %v\n%s", err, b)
	}
	return a
}

// files are the three documents of one message, written to disk.
type files struct{ candidate, request, approval string }

func (f files) args(cmd string, extra ...string) []string {
	a := []string{cmd, "--candidate", f.candidate, "--request", f.request}
	if f.approval != "" {
		a = append(a, "--approval", f.approval)
	}
	return append(a, extra...)
}

var (
	seedOriginal = files{seedFile("candidate.json"), seedFile("request.json"), seedFile("approval.json")}
	seedChanged  = files{seedFile("candidate.json"), seedFile("request-changed.json"), seedFile("approval-changed.json")}
	seedNew      = files{seedFile("candidate.json"), seedFile("request-new-intent.json"), seedFile("approval-new-intent.json")}
)

// splitTampered writes the members of a tampered envelope to files; the
// approval is "" when the envelope has none.
func splitTampered(t *testing.T, tc scenario.Tampered) files {
	t.Helper()
	parts, err := document.SplitEnvelope(tc.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := canon.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, dir, name, b)
	}
	f := files{candidate: write("candidate.json", parts.Candidate), request: write("request.json", parts.Request)}
	if parts.Approval != nil {
		f.approval = write("approval.json", parts.Approval)
	}
	return f
}

// tampered returns the seed scenario's tampered cases, and the gate's own
// refusal of each.
func tampered(t *testing.T) ([]scenario.Tampered, map[string]*gate.Error) {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	cases := s.TamperedCases()
	refusals := make(map[string]*gate.Error, len(cases))
	for _, tc := range cases {
		_, err := gate.CheckBindings(tc.Envelope)
		var ge *gate.Error
		if !errors.As(err, &ge) {
			t.Fatalf("%s: the gate does not refuse it: %v", tc.Name, err)
		}
		refusals[tc.Name] = ge
	}
	return cases, refusals
}

func TestDigest(t *testing.T) {
	type fixture struct{ file, want, approval string }
	var fixtures []fixture
	for _, f := range []files{seedOriginal, seedChanged, seedNew} {
		a := decodeApproval(t, readFile(t, f.approval))
		fixtures = append(fixtures,
			fixture{f.candidate, a.Candidate.Digest, f.approval},
			fixture{f.request, a.Request.Digest, f.approval})
	}
	for _, fx := range fixtures {
		name := filepath.Base(fx.file)
		t.Run(name+" digests to what "+filepath.Base(fx.approval)+" carries", func(t *testing.T) {
			t.Parallel()
			r := publisher(t, nil, "digest", fx.file)
			r.expect(t, 0)
			if r.stdout != fx.want+"\n" {
				t.Fatalf("digest %q, want %q", r.stdout, fx.want)
			}
		})
		t.Run("the canonical bytes of "+name+" digest to the same", func(t *testing.T) {
			t.Parallel()
			r := publisher(t, nil, "digest", "--canonical", fx.file)
			r.expect(t, 0)
			sum := sha256.Sum256([]byte(r.stdout))
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != fx.want {
				t.Fatalf("the canonical bytes digest to %s, want %s:\n%s", got, fx.want, r.stdout)
			}
			if r.stdout == string(readFile(t, fx.file)) {
				t.Fatal("the canonical bytes are the file's bytes; the fixture is indented, so nothing was canonicalised")
			}
		})
		t.Run(name+" read from standard input digests to the same", func(t *testing.T) {
			t.Parallel()
			r := publisher(t, readFile(t, fx.file), "digest", "-")
			r.expect(t, 0)
			if r.stdout != fx.want+"\n" {
				t.Fatalf("digest %q, want %q", r.stdout, fx.want)
			}
		})
	}

	dir := t.TempDir()
	dup := writeFile(t, dir, "dup.json", []byte(`{"title":"a","title":"b"}`))
	for _, c := range []struct {
		name   string
		stdin  []byte
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{"a file with a duplicate member fails naming the file and the member", nil, []string{"digest", dup}, 1, "",
			[]string{dup, `duplicate member name "title"`}},
		{"canonical bytes of a file with a duplicate member are refused too", nil, []string{"digest", "--canonical", dup}, 1, "",
			[]string{dup, `duplicate member name "title"`}},
		{"standard input with a duplicate member fails", []byte(`{"a":1,"a":2}`), []string{"digest", "-"}, 1, "",
			[]string{`duplicate member name "a"`}},
		{"a missing file fails naming it", nil, []string{"digest", filepath.Join(dir, "absent.json")}, 1, "",
			[]string{"absent.json"}},
		{"no file is a usage error", nil, []string{"digest"}, 2, "",
			[]string{"Usage: publisher digest", "exactly one FILE"}},
		{"two files are a usage error", nil, []string{"digest", dup, dup}, 2, "",
			[]string{"Usage: publisher digest"}},
		{"--help prints the usage and succeeds", nil, []string{"digest", "--help"}, 0, "",
			[]string{"Usage: publisher digest", "-canonical"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := publisher(t, c.stdin, c.args...)
			r.expect(t, c.code)
			if r.stdout != c.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, c.stdout)
			}
			for _, s := range c.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

func TestApprove(t *testing.T) {
	for _, seed := range []struct {
		name string
		f    files
	}{{"the original request", seedOriginal}, {"the changed request", seedChanged}, {"the request with a new intent", seedNew}} {
		for _, toFile := range []bool{false, true} {
			where := "standard output"
			if toFile {
				where = "-o FILE"
			}
			t.Run("an approval of "+seed.name+" written to "+where+" passes check and the gate", func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), "approval.json")
				args := files{seed.f.candidate, seed.f.request, ""}.args("approve", "--by", "reviewer 9")
				if toFile {
					args = append(args, "-o", out)
				}
				r := publisher(t, nil, args...)
				r.expect(t, 0)
				if toFile {
					if r.stdout != "" {
						t.Errorf("with -o, standard output holds %q", r.stdout)
					}
				} else {
					writeFile(t, filepath.Dir(out), filepath.Base(out), []byte(r.stdout))
				}
				approval := readFile(t, out)
				a := decodeApproval(t, approval)
				if a.ApprovedBy != "reviewer 9" {
					t.Errorf("approved_by %q, want %q", a.ApprovedBy, "reviewer 9")
				}
				want := decodeApproval(t, readFile(t, seed.f.approval))
				if a.Candidate != want.Candidate || a.Request != want.Request {
					t.Errorf("the approval binds %+v %+v; the fixture %+v %+v", a.Candidate, a.Request, want.Candidate, want.Request)
				}
				if _, err := gate.CheckDocumentBindings(readFile(t, seed.f.candidate), readFile(t, seed.f.request), approval); err != nil {
					t.Fatalf("the gate refuses the approval: %v", err)
				}
				check := publisher(t, nil, files{seed.f.candidate, seed.f.request, out}.args("check")...)
				check.expect(t, 0)
				if !strings.HasPrefix(check.stdout, "pass (") {
					t.Fatalf("check printed %q, want pass", check.stdout)
				}
			})
		}
	}

	cand := readFile(t, seedFile("candidate.json"))
	dir := t.TempDir()
	editedVersion := writeFile(t, dir, "candidate-v4.json", scenario.Edit(cand, func(m map[string]any) {
		m["source"].(map[string]any)["version"] = "v4"
	}))
	editedSummary := writeFile(t, dir, "candidate-edited.json", scenario.Edit(cand, func(m map[string]any) {
		m["summary"] = "有人說會把通知設定整個重寫"
	}))
	otherCandidate := writeFile(t, dir, "request-other.json", scenario.Edit(readFile(t, seedFile("request.json")), func(m map[string]any) {
		m["candidate_ref"].(map[string]any)["candidate_id"] = "cand-0002"
	}))
	notStrict := writeFile(t, dir, "candidate-dup.json", []byte(strings.Replace(string(cand), `"kind":`, `"kind": "x", "kind":`, 1)))
	for _, c := range []struct {
		name           string
		candidate, req string
		extra          []string
		code           int
		stderr         []string
	}{
		{"the changed request with a candidate whose source version was edited is refused", editedVersion, seedFile("request-changed.json"),
			[]string{"--by", "reviewer-1"}, 1, []string{"does not point at this candidate", `"v4"`}},
		{"the changed request with a candidate whose summary was edited is refused", editedSummary, seedFile("request-changed.json"),
			[]string{"--by", "reviewer-1"}, 1, []string{"does not point at this candidate", "candidate digest"}},
		{"a request naming another candidate is refused", seedFile("candidate.json"), otherCandidate,
			[]string{"--by", "reviewer-1"}, 1, []string{"does not point at this candidate", `"cand-0002"`}},
		{"a candidate that is not strict JSON is refused naming the path", notStrict, seedFile("request.json"),
			[]string{"--by", "reviewer-1"}, 1, []string{"reading the candidate", `duplicate member name "kind"`, "at $"}},
		{"a missing --by is a usage error", seedFile("candidate.json"), seedFile("request.json"),
			nil, 2, []string{"--by NAME is required", "Usage: publisher approve"}},
		{"a --by of spaces is a usage error", seedFile("candidate.json"), seedFile("request.json"),
			[]string{"--by", "   "}, 2, []string{"--by NAME is required"}},
		{"an --id with a space is a usage error", seedFile("candidate.json"), seedFile("request.json"),
			[]string{"--by", "reviewer-1", "--id", "my approval"}, 2, []string{`--id "my approval"`}},
		{"a missing --request is a usage error", seedFile("candidate.json"), "",
			[]string{"--by", "reviewer-1"}, 2, []string{"--request FILE is required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "approval.json")
			args := []string{"approve", "--candidate", c.candidate}
			if c.req != "" {
				args = append(args, "--request", c.req)
			}
			r := publisher(t, nil, append(append(args, c.extra...), "-o", out)...)
			r.expect(t, c.code)
			for _, s := range c.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the -o file was written (stat: %v)", err)
			}
			if r.stdout != "" {
				t.Errorf("standard output holds %q", r.stdout)
			}
		})
	}
}

// checkJSON is check --json's output, read strictly.
func checkJSON(t *testing.T, out string) map[string]string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var m map[string]string
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("check --json printed %q: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("check --json printed more than one value: %q", out)
	}
	return m
}

func TestCheck(t *testing.T) {
	for _, seed := range []struct {
		name string
		f    files
	}{{"the original", seedOriginal}, {"the changed request", seedChanged}, {"the request with a new intent", seedNew}} {
		t.Run(seed.name+" with its approval passes", func(t *testing.T) {
			t.Parallel()
			a := decodeApproval(t, readFile(t, seed.f.approval))
			r := publisher(t, nil, seed.f.args("check")...)
			r.expect(t, 0)
			want := fmt.Sprintf("pass (signature, expiry and scope not checked: no --trusted-approvers)\ncandidate %s\nrequest   %s\n", a.Candidate.Digest, a.Request.Digest)
			if r.stdout != want {
				t.Errorf("stdout %q, want %q", r.stdout, want)
			}
			j := publisher(t, nil, seed.f.args("check", "--json")...)
			j.expect(t, 0)
			got := checkJSON(t, j.stdout)
			if len(got) != 4 || got["result"] != "pass" || got["not_checked"] != publish.NotChecked || got["candidate_digest"] != a.Candidate.Digest || got["request_digest"] != a.Request.Digest {
				t.Errorf("check --json printed %v", got)
			}
		})
	}

	cases, refusals := tampered(t)
	for _, tc := range cases {
		if tc.Name == "no-approval" {
			continue // check needs --approval; see below
		}
		ge := refusals[tc.Name]
		t.Run(tc.Name+" fails at "+tc.Check, func(t *testing.T) {
			t.Parallel()
			f := splitTampered(t, tc)
			r := publisher(t, nil, f.args("check")...)
			r.expect(t, 1)
			if want := fmt.Sprintf("fail: %s at %s: %s\n", tc.Check, ge.Path, ge.Reason); r.stdout != want {
				t.Errorf("stdout %q, want %q", r.stdout, want)
			}
			j := publisher(t, nil, f.args("check", "--json")...)
			j.expect(t, 1)
			want := map[string]string{"result": "fail", "check": tc.Check, "path": ge.Path, "reason": ge.Reason}
			if got := checkJSON(t, j.stdout); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("check --json printed %v, want %v", got, want)
			}
		})
	}

	var noApproval files
	for _, tc := range cases {
		if tc.Name == "no-approval" {
			noApproval = splitTampered(t, tc)
		}
	}
	if noApproval.candidate == "" {
		t.Fatal("the tampered cases lack no-approval")
	}
	t.Run("no-approval without --approval is a usage error", func(t *testing.T) {
		t.Parallel()
		r := publisher(t, nil, noApproval.args("check")...)
		r.expect(t, 2)
		if !strings.Contains(r.stderr, "--approval FILE is required") {
			t.Errorf("stderr lacks the missing flag:\n%s", r.stderr)
		}
	})
	t.Run("no-approval with an empty approval file fails at approval_format", func(t *testing.T) {
		t.Parallel()
		f := noApproval
		f.approval = writeFile(t, t.TempDir(), "empty.json", nil)
		r := publisher(t, nil, f.args("check", "--json")...)
		r.expect(t, 1)
		if got := checkJSON(t, r.stdout); got["result"] != "fail" || got["check"] != gate.CheckApprovalFormat || got["path"] != "$.approval" {
			t.Errorf("check --json printed %v, want a fail at approval_format, $.approval", got)
		}
	})
	t.Run("a missing candidate file is an error naming it", func(t *testing.T) {
		t.Parallel()
		f := seedOriginal
		f.candidate = filepath.Join(t.TempDir(), "absent.json")
		r := publisher(t, nil, f.args("check")...)
		r.expect(t, 1)
		if !strings.Contains(r.stderr, "absent.json") {
			t.Errorf("stderr does not name the file:\n%s", r.stderr)
		}
	})
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
			if !strings.Contains(r.stdout, "rejected at request_binding ($.request):") {
				t.Errorf("output lacks the rejection:\n%s", r.stdout)
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

func TestUsageAndHelp(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"send --help names every exit status", []string{"send", "--help"}, 0, []string{
			fmt.Sprintf("%d created or replayed", exitOK),
			fmt.Sprintf("%d error or local gate failure", exitFailure),
			fmt.Sprintf("%d usage", exitUsage),
			fmt.Sprintf("%d idempotency_conflict", exitConflict),
			fmt.Sprintf("%d rejected", exitRejected),
			fmt.Sprintf("%d dead_lettered", exitDead),
			fmt.Sprintf("%d published, but no receipt (none within --wait, the connection lost, the receipts unreadable;", exitNoAnswer),
		}},
		{"check --help names its exit statuses", []string{"check", "--help"}, 0, []string{"0 pass", "1 a check failed", "2 usage"}},
		{"approve --help names its flags", []string{"approve", "--help"}, 0, []string{"-by NAME", "-o FILE", "-id ID"}},
		{"--help lists the commands", []string{"--help"}, 0, []string{"publisher digest", "publisher approve", "publisher check", "publisher send"}},
		{"no command is a usage error", nil, 2, []string{"publisher send"}},
		{"an unknown command is a usage error", []string{"resend"}, 2, []string{`unknown command "resend"`}},
		{"an unknown flag is a usage error", []string{"send", "--retry"}, 2, []string{"-retry"}},
		{"send without files is a usage error", []string{"send"}, 2, []string{"--candidate FILE is required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := publisher(t, nil, c.args...)
			r.expect(t, c.code)
			out := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s%s", w, r.stdout, r.stderr)
				}
			}
		})
	}
}
