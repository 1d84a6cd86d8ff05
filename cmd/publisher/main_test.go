package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
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
	return publisherWithEnv(t, nil, stdin, args...)
}

// publisherWithEnv is publisher with env (NAME=VALUE) added to the
// environment the process inherits.
func publisherWithEnv(t *testing.T, env []string, stdin []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	// A race-enabled binary sleeps a second before it exits unless told not to;
	// a race found in the child still ends it with status 66.
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
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
		{"send without files is a usage error", []string{"send"}, 2, []string{"nothing to send"}},
		{"send with one document is a usage error naming the next", []string{"send", "--candidate", seedFile("candidate.json")}, 2, []string{"--request FILE is required"}},
		{"send --help names both forms", []string{"send", "--help"}, 0, []string{"(--candidate F --request F --approval F | --envelope FILE)", "-envelope FILE", "byte for byte"}},
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

func TestVersionPrintsTheModuleVersionAndExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 {
		t.Fatalf("exit %d (%v): %s", code, err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "publisher ") || len(strings.TrimSpace(out.String())) <= len("publisher") {
		t.Fatalf("printed %q", out.String())
	}
}

func TestDigestRefusesANumberJCSWouldRoundAsTheExecutorsDo(t *testing.T) {
	dir := t.TempDir()
	digest := func(doc string) (string, string, int) {
		path := filepath.Join(dir, "doc.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), []string{"digest", path}, strings.NewReader(""), &out, &errb), &errb)
		return out.String(), errb.String(), code
	}
	for _, doc := range []string{`{"n":9007199254740993}`, `{"n":9007199254740992.4}`} {
		out, errs, code := digest(doc)
		if code != exitFailure || !strings.Contains(errs, "not exactly a double") {
			t.Errorf("%s: exit %d, printed %q, error %q; want it refused as not exactly a double", doc, code, out, errs)
		}
	}
	if out, errs, code := digest(`{"n":9007199254740992.0}`); code != 0 || !strings.HasPrefix(out, "sha256:") {
		t.Errorf("2^53 written as 9007199254740992.0: exit %d, %q, %q", code, out, errs)
	}
}

func TestApproveSaysWhichProviderAndDestinationItApproved(t *testing.T) {
	dir := t.TempDir()
	seedRequest := readFile(t, seedFile("request.json"))
	caldavTeam := writeFile(t, dir, "caldav-team.json", scenario.Edit(seedRequest, func(m map[string]any) {
		m["provider"], m["destination"] = document.ProviderCalDAV, "team"
	}))
	redmine := writeFile(t, dir, "redmine.json", scenario.Edit(seedRequest, func(m map[string]any) { m["provider"] = document.ProviderRedmine }))
	for _, c := range []struct{ name, request, want string }{
		{"the seed request is approved for the fake service's default destination", seedFile("request.json"),
			"approved for provider fake-task-provider.v1, destination default (capability create_fake_task)"},
		{"a request for a CalDAV calendar named team is approved for it", caldavTeam,
			"approved for provider caldav-task.v1, destination team (capability create_caldav_task)"},
		{"a request for Redmine naming no destination is approved for its default", redmine,
			"approved for provider redmine-issue.v1, destination default (capability create_redmine_issue)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := publisher(t, nil, files{seedFile("candidate.json"), c.request, ""}.args("approve", "--by", "reviewer-1", "-o", filepath.Join(t.TempDir(), "a.json"))...)
			r.expect(t, 0)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
		})
	}
	t.Run("a request for an unknown provider is refused, naming the known ones", func(t *testing.T) {
		bad := writeFile(t, dir, "bad.json", scenario.Edit(seedRequest, func(m map[string]any) { m["provider"] = "caldav.v1" }))
		r := publisher(t, nil, files{seedFile("candidate.json"), bad, ""}.args("approve", "--by", "reviewer-1", "-o", filepath.Join(t.TempDir(), "a.json"))...)
		if r.code == 0 {
			t.Fatalf("approve accepted an unknown provider:\n%s", r.stderr)
		}
		for _, want := range []string{`unknown provider "caldav.v1"`, document.ProviderCalDAV} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
}
