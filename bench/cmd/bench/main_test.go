package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the bench command: a test runs it as a
// separate OS process with this variable set.
const asMain = "SENDTWICE_BENCH_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// result is how one bench process ended.
type result struct {
	stdout, stderr string
	code           int
}

// benchCmd runs the bench command as a separate process.
func benchCmd(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	// A race-enabled binary sleeps a second before it exits unless told not to;
	// a race found in the child still ends it with status 66.
	cmd.Env = append(os.Environ(), asMain+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("bench %s did not end within a minute\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running bench %s: %v", strings.Join(args, " "), err)
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

// The command says its version, and --help its flags, with status 0.
func TestBenchVersionAndHelp(t *testing.T) {
	r := benchCmd(t, "--version")
	r.expect(t, 0)
	if !strings.HasPrefix(r.stdout, "bench ") {
		t.Errorf("--version printed %q", r.stdout)
	}
	r = benchCmd(t, "--help")
	r.expect(t, 0)
	if !strings.Contains(r.stderr, "Usage: bench [backlog|live]") || !strings.Contains(r.stderr, "-approvals") {
		t.Errorf("--help does not give the usage and the flags:\n%s", r.stderr)
	}
}
