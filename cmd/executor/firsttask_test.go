package main

// A first task as a new user makes it, with the programs only: a reviewer
// key made by publisher keygen --trusted, executor serve --embedded
// trusting it, a request written by publisher request, approved by
// publisher approve --key, sent twice by publisher send, and executor
// status. No JSON is written by hand.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
)

// buildPublisher builds the publisher program into dir and returns its path.
func buildPublisher(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "publisher")
	if out, err := exec.Command("go", "build", "-o", bin, "../publisher").CombinedOutput(); err != nil {
		t.Fatalf("building the publisher: %v\n%s", err, out)
	}
	return bin
}

// firstTask is one run of the first task: its directory, the publisher
// and the embedded server's NATS URL.
type firstTask struct {
	dir, publisher, url string
}

// startFirstTask makes the reviewer's key and starts executor serve
// --embedded with the task service flags given, trusting that key.
func startFirstTask(t *testing.T, serviceFlags ...string) *firstTask {
	t.Helper()
	dir := t.TempDir()
	f := &firstTask{dir: dir, publisher: buildPublisher(t, dir)}
	f.run(t, 0, "keygen", "--name", "ada", "--dir", dir, "--trusted", filepath.Join(dir, "trusted.json"))
	natsAddr, httpAddr := "127.0.0.1:"+strconv.Itoa(freePort(t)), "127.0.0.1:"+strconv.Itoa(freePort(t))
	f.url = "nats://" + natsAddr
	startServeProcess(t, append([]string{"--embedded", "--trusted-approvers", filepath.Join(dir, "trusted.json"),
		"--data", filepath.Join(dir, "data"), "--listen", natsAddr, "--http", httpAddr, "--id", "exec-1"}, serviceFlags...)...)
	waitFor(t, 30*time.Second, "serve --embedded to be ready", func() bool { return ready(httpAddr) })
	return f
}

// run runs the publisher with args (its environment this process's) and
// fails the test unless it ends with code; it returns what it printed on
// standard output.
func (f *firstTask) run(t *testing.T, code int, args ...string) string {
	t.Helper()
	cmd := exec.Command(f.publisher, args...)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("publisher %s: exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, err, code, out.String(), errOut.String())
	}
	return out.String()
}

// requestApproveSendTwice writes the request with the flags given, approves
// it with the reviewer's key, sends it twice, and checks the receipts say
// created, then replayed with the same task.
func (f *firstTask) requestApproveSendTwice(t *testing.T, requestFlags ...string) {
	t.Helper()
	in := func(name string) string { return filepath.Join(f.dir, name) }
	f.run(t, 0, append([]string{"request", "--intent", "first-task-0001", "--title", "Check the notification settings", "--due", "2026-12-24",
		"--out", f.dir}, requestFlags...)...)
	f.run(t, 0, "approve", "--candidate", in("candidate.json"), "--request", in("request.json"), "--key", in("ada.key"), "-o", in("approval.json"))
	send := []string{"send", "--candidate", in("candidate.json"), "--request", in("request.json"), "--approval", in("approval.json"),
		"--trusted-approvers", in("trusted.json"), "--server", f.url, "--wait", "30s"}
	first := f.run(t, 0, send...)
	task, _, ok := strings.Cut(strings.TrimPrefix(first, "created: task "), " ")
	if !strings.HasPrefix(first, "created: task ") || !ok {
		t.Fatalf("the first send printed %q, want created", first)
	}
	second := f.run(t, 0, send...)
	if want := "replayed: the same task " + task + " for intent first-task-0001; nothing new was created"; !strings.HasPrefix(second, want) {
		t.Fatalf("the second send printed %q, want %q", second, want)
	}
}

// status runs executor status against the embedded server.
func (f *firstTask) status(t *testing.T, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, err := runCLI(ctx, append([]string{"status", "--server", f.url}, extra...)...)
	if err != nil {
		t.Fatalf("status: %v\n%s%s", err, out, errOut)
	}
	return out
}

func TestAFirstTaskWithTheProgramsOnlyIsCreatedThenReplayedOnTheFakeService(t *testing.T) {
	f := startFirstTask(t)
	f.requestApproveSendTwice(t)
	expectLines(t, "status", f.status(t),
		"task service: requests received 2, creates executed 1, tasks existing 1",
		"receipts:     created 1 replayed 1 idempotency_conflict 0 rejected 0 dead_lettered 0")
}

func TestAFirstTaskWithTheProgramsOnlyIsCreatedThenReplayedOnRadicale(t *testing.T) {
	srv := davtest.Start(t, davtest.Radicale, davtest.Options{})
	f := startFirstTask(t, "--task-service", "caldav", "--caldav-url", srv.CollectionURL)
	f.requestApproveSendTwice(t, "--provider", "caldav")
	expectLines(t, "status", f.status(t),
		"task service: caldav",
		"tasks:        1 carrying an intent id: 1 of the pipeline",
		"receipts:     created 1 replayed 1 idempotency_conflict 0 rejected 0 dead_lettered 0")
	t.Run("a request for the fake service, as the seed's is, is refused at the check destination", func(t *testing.T) {
		in := func(name string) string { return filepath.Join(f.dir, name) }
		f.run(t, 0, "request", "--intent", "first-task-0002", "--title", "For the fake service", "--out", f.dir, "--force")
		f.run(t, 0, "approve", "--candidate", in("candidate.json"), "--request", in("request.json"), "--key", in("ada.key"), "-o", in("approval.json"))
		out := f.run(t, 4, "send", "--candidate", in("candidate.json"), "--request", in("request.json"), "--approval", in("approval.json"), "--server", f.url, "--wait", "30s")
		if !strings.HasPrefix(out, "rejected at destination ($.request.provider)") {
			t.Errorf("send printed %q, want a rejection at destination", out)
		}
	})
}

// startServeProcess runs executor serve with args as a process of its own
// until the test ends, and logs its output if the test fails.
func startServeProcess(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE=atexit_sleep_ms=0")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	})
}
