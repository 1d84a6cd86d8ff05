package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

const consoleDir = "../../testdata/console"

func TestConsoleUsage(t *testing.T) {
	r := publisher(t, nil, "console", "--help")
	r.expect(t, exitOK)
	for _, want := range []string{"NAME.candidate.json", "--listen", "--allowed-host", "--trusted-approvers", "SENDTWICE_TRUSTED_APPROVERS", "--candidates", "--by", "--wait", "--server", "--trace-url", "http://127.0.0.1:16686/trace/{trace_id} for Jaeger"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("console --help lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait", "0s"}, "--wait must be positive"},
		{[]string{"--candidates", "/nonexistent-folder"}, "--candidates /nonexistent-folder: not a folder"},
		{[]string{"--listen", "8080"}, "--listen \"8080\""},
		{[]string{"--by", strings.Repeat("x", 300)}, "--by NAME must be"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--allowed-host", "http://x/"}, "--allowed-host"},
		{[]string{"--trace-url", "http://127.0.0.1:16686/trace/"}, `--trace-url "http://127.0.0.1:16686/trace/": no {trace_id} in it`},
		{[]string{"--trace-url", "jaeger/trace/{trace_id}"}, `--trace-url "jaeger/trace/{trace_id}": not an http or https URL`},
	} {
		r := publisher(t, nil, append([]string{"console", "--candidates", consoleDir}, tc.args...)...)
		r.expect(t, exitUsage)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("console %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, r.stderr)
		}
	}
	r = publisher(t, nil, "console", "--candidates", consoleDir, "--server", "nats://127.0.0.1:1")
	r.expect(t, exitFailure)
	if !strings.Contains(r.stderr, "connecting to NATS") {
		t.Errorf("without a server: %s", r.stderr)
	}
}

// syncBuffer collects a child process's output.
type syncBuffer = testenv.Buffer

var consoleURL = regexp.MustCompile(`^approval console on (http://127\.0\.0\.1:[0-9]+/)(\?token=[0-9a-f]{64}) \(candidates in `)

// TestConsoleServesAndStops runs publisher console as its own process: it
// serves the candidates, approves and sends with a plain form post, and
// stops cleanly on an interrupt.
func TestConsoleServesAndStops(t *testing.T) {
	env := testenv.Start(t)
	_, stopExecutor := env.Executor(executor.Config{ID: "exec-1"})
	cmd := exec.Command(os.Args[0], "console", "--listen", "127.0.0.1:0", "--candidates", consoleDir,
		"--server", env.URL(), "--by", "reviewer-1", "--wait", "20s", "--allowed-host", "console.example")
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var base, start string
	select {
	case l := <-lines:
		m := consoleURL.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("the console printed %q", l)
		}
		base, start = m[1], m[1]+m[2]
	case <-time.After(30 * time.Second):
		t.Fatalf("the console did not start\nstderr:\n%s", stderr.String())
	}

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		t.Helper()
		return getPage(t, client, base, path)
	}
	// Before the printed address is opened, nothing is served.
	if code, body := get("/"); code != http.StatusUnauthorized || !strings.Contains(body, "Open the address the console printed when it started") {
		t.Fatalf("GET / without the cookie: %d\n%s", code, body)
	}
	if resp, err := client.Get(start); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("opening the printed address: status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, `<a href="/c/notify-checks">notify-checks</a>`) {
		t.Fatalf("GET /: %d\n%s", code, body)
	}
	// It answers only to its own host names.
	u, _ := url.Parse(base)
	for host, want := range map[string]int{"attacker.example": http.StatusMisdirectedRequest, "attacker.example" + ":" + u.Port(): http.StatusMisdirectedRequest,
		"localhost:" + u.Port(): http.StatusOK, "console.example": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, base, nil)
		req.Host = host
		for _, ck := range jar.Cookies(u) {
			req.AddCookie(ck)
		}
		if resp, err := client.Do(req); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != want {
			t.Errorf("a request for host name %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}

	press := func() string {
		t.Helper()
		form := url.Values{"by": {"reviewer-1"},
			"candidate_digest": {"sha256:8ab0a8135ae2223239602e5651807fdaa5ce74c1dccb239174d5e968d10ea970"},
			"request_digest":   {"sha256:3fd3958b68b92fcf34b6c14ccd0c2175e633377704dedac864ce29b72eb530a8"}}
		resp, err := client.PostForm(base+"c/notify-checks/send", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/c/notify-checks/sends/") {
			t.Fatalf("pressing: status %d, Location %q", resp.StatusCode, loc)
		}
		return strings.TrimSuffix(loc, "#result")
	}
	for i, want := range []string{"created: task <code class=\"task\">fake-task-0001</code>", "replayed: the same task <code class=\"task\">fake-task-0001</code>"} {
		code, body := get(press() + "?wait=1")
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("press %d: status %d, want %q\n%s", i+1, code, want, body)
		}
	}
	if c := env.Counts(); c.RequestsReceived != 2 || c.CreatesExecuted != 1 || c.TasksExisting != 1 {
		t.Fatalf("the task service counts %+v, want 2, 1, 1", c)
	}

	// An open event stream, waiting for a receipt that cannot come, must
	// not keep the console from stopping.
	stopExecutor()
	evResp, err := client.Get(base + strings.TrimPrefix(press(), "/") + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer evResp.Body.Close()
	if first, err := bufio.NewReader(evResp.Body).ReadString('\n'); err != nil || first != "retry: 2000\n" {
		t.Fatalf("the event stream starts with %q, %v", first, err)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("the console ended with %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the console did not stop on an interrupt\nstderr:\n%s", stderr.String())
	}
	for _, want := range []string{"approved", "published", "receipt"} {
		if !strings.Contains(stderr.String(), "msg="+want) {
			t.Errorf("the log lacks %q:\n%s", want, stderr.String())
		}
	}
	// The token is printed once, on standard output, and never logged.
	if tok := strings.TrimPrefix(start[len(base):], "?token="); strings.Contains(stderr.String(), tok) {
		t.Errorf("the log shows the token:\n%s", stderr.String())
	}
}

// reviewerKey writes the key pair of the reviewer name and a
// trusted-approvers file naming it, and returns their paths and the key.
func reviewerKey(t *testing.T, name string) (keyFile, trustedFile string, key *sign.Key) {
	t.Helper()
	dir := t.TempDir()
	key = scenario.TestKey()
	entry, err := sign.WriteKeyPair(dir, name, key)
	if err != nil {
		t.Fatal(err)
	}
	trustedFile = filepath.Join(dir, "trusted-approvers.json")
	if err := sign.WriteTrusted(trustedFile, entry); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name+".key"), trustedFile, key
}

// TestConsoleApproverNameFromTrustedFile: with --trusted-approvers (or
// $SENDTWICE_TRUSTED_APPROVERS), the console refuses a --by that is not the
// name the file gives --key, saying whose key it is, and a key the file does
// not trust.
func TestConsoleApproverNameFromTrustedFile(t *testing.T) {
	keyFile, trustedFile, key := reviewerKey(t, "reviewer-1")
	_, otherTrusted, _ := reviewerKey(t, "reviewer-1")
	other, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WriteTrusted(otherTrusted, sign.ApproverFor("reviewer-2", other.Public())); err != nil {
		t.Fatal(err)
	}
	base := []string{"console", "--candidates", consoleDir, "--server", "nats://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--key", keyFile, "--trusted-approvers", trustedFile, "--by", "mallory"}, "",
			`--by "mallory": the key ` + keyFile + ` (key ` + key.ID + `) belongs to "reviewer-1" in ` + trustedFile},
		{[]string{"--key", keyFile, "--by", "mallory"}, trustedFile, `belongs to "reviewer-1"`},
		{[]string{"--key", keyFile, "--trusted-approvers", otherTrusted}, "", "is not among the trusted approvers in " + otherTrusted},
		{[]string{"--trusted-approvers", trustedFile}, "", "--trusted-approvers needs --key"},
	} {
		t.Setenv("SENDTWICE_TRUSTED_APPROVERS", tc.env)
		r := publisher(t, nil, append(base, tc.args...)...)
		r.expect(t, exitUsage)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("console %s (SENDTWICE_TRUSTED_APPROVERS=%s): stderr lacks %q:\n%s", strings.Join(tc.args, " "), tc.env, tc.want, r.stderr)
		}
	}
	// The key's own name passes the check (and then needs NATS).
	t.Setenv("SENDTWICE_TRUSTED_APPROVERS", trustedFile)
	r := publisher(t, nil, append(base, "--key", keyFile, "--by", "reviewer-1")...)
	r.expect(t, exitFailure)
	if !strings.Contains(r.stderr, "connecting to NATS") {
		t.Errorf("with the key's own name: %s", r.stderr)
	}
}

// TestConsoleSignsInTheKeysName: with a key and the trusted approvers, and
// $USER someone else, the console's approvals name the key's reviewer and
// pass an executor that trusts only that key.
func TestConsoleSignsInTheKeysName(t *testing.T) {
	keyFile, trustedFile, key := reviewerKey(t, "reviewer-1")
	env := testenv.Start(t)
	kr, err := sign.LoadTrusted(trustedFile)
	if err != nil {
		t.Fatal(err)
	}
	env.Executor(executor.Config{ID: "exec-1", Gate: &gate.Checker{Keys: kr}})
	t.Setenv("USER", "someone-else")
	t.Setenv("SENDTWICE_TRUSTED_APPROVERS", trustedFile)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runConsole(ctx, []string{"--listen", "127.0.0.1:0", "--candidates", consoleDir, "--server", env.URL(),
			"--key", keyFile, "--wait", "20s"}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var m []string
	for deadline := time.Now().Add(30 * time.Second); m == nil; time.Sleep(20 * time.Millisecond) {
		if m = consoleURL.FindStringSubmatch(strings.TrimSpace(stdout.String())); m == nil && time.Now().After(deadline) {
			t.Fatalf("the console did not start\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	}
	base := m[1]
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) string {
		t.Helper()
		code, b := getPage(t, client, base, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, b)
		}
		return b
	}
	get(m[2])
	if page := get("/c/notify-checks"); !strings.Contains(page, `value="reviewer-1"`) || !strings.Contains(page, key.ID) {
		t.Fatalf("the form does not start with the key's name:\n%s", page)
	}
	resp, err := client.PostForm(base+"c/notify-checks/send", url.Values{
		"candidate_digest": {"sha256:8ab0a8135ae2223239602e5651807fdaa5ce74c1dccb239174d5e968d10ea970"},
		"request_digest":   {"sha256:3fd3958b68b92fcf34b6c14ccd0c2175e633377704dedac864ce29b72eb530a8"},
		"by":               {"reviewer-1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path == "/c/notify-checks/send" {
		t.Fatalf("the send was not redirected to its page: %d\n%s\nstderr:\n%s", resp.StatusCode, body, stderr.String())
	}
	if page := get(resp.Request.URL.Path + "?wait=1"); !strings.Contains(page, `data-state="created"`) {
		t.Fatalf("the signed approval was not created:\n%s", page)
	}
	if a := get("/c/notify-checks/approval.json"); !strings.Contains(a, `"approved_by": "reviewer-1"`) {
		t.Fatalf("the approval: %s", a)
	}
}

func TestConsoleSignsInTheNameItsKeyFileRecords(t *testing.T) {
	keyFile, _, _ := reviewerKey(t, "reviewer-7")
	t.Setenv("USER", "somebody-else")
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"console", "--key", keyFile, "--by", "somebody-else",
		"--listen", "127.0.0.1:0", "--server", "nats://127.0.0.1:1"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `belongs to "reviewer-7"`) {
		t.Fatalf("console --by another name than the key's: %v\n%s", err, errOut.String())
	}
}

// getPage GETs path below the console's base address with client: the
// status and the body.
func getPage(t *testing.T, client *http.Client, base, path string) (int, string) {
	t.Helper()
	resp, err := client.Get(base + strings.TrimPrefix(path, "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
