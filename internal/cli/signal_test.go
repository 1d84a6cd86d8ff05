package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mainRole makes the test binary run Main with a command that reports the
// end of its context and then hangs, as a command stuck in its shutdown.
const mainRole = "SENDTWICE_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainRole) != "" {
		Main("cmd", func(ctx context.Context) error {
			fmt.Println("running")
			<-ctx.Done()
			fmt.Println("shutting down")
			select {}
		})
	}
	os.Exit(m.Run())
}

func TestTheFirstSignalEndsTheContextAndASecondExitsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainRole+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			_ = cmd.Process.Kill()
			t.Fatalf("stdout %q, want %q", lines.Text(), want)
		}
	}
	expect("running")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	expect("shutting down")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("a second signal did not end the process")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitSecondSignal {
		t.Errorf("exit %v, want status %d", err, ExitSecondSignal)
	}
	if !strings.Contains(stderr.String(), "cmd: terminated again: exiting at once") {
		t.Errorf("stderr %q", stderr.String())
	}
}
