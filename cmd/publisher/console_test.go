package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

const consoleDir = "../../testdata/console"

func TestConsoleUsage(t *testing.T) {
	r := publisher(t, nil, "console", "--help")
	r.expect(t, exitOK)
	for _, want := range []string{"NAME.candidate.json", "--listen", "--allowed-host", "--candidates", "--by", "--wait", "--server"} {
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
		resp, err := client.Get(base + strings.TrimPrefix(path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
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
