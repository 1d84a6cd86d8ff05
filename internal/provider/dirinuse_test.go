package provider

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelperProcessHoldingAStore is not a test: run by the test below in a
// second process, it holds the store in $SENDTWICE_HOLD_STORE until its
// standard input closes.
func TestHelperProcessHoldingAStore(t *testing.T) {
	dir := os.Getenv("SENDTWICE_HOLD_STORE")
	if dir == "" {
		t.Skip("helper process")
	}
	st, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	os.Stdout.WriteString("holding\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func TestAStoreOnADirectoryAnotherProcessHoldsSaysSo(t *testing.T) {
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^TestHelperProcessHoldingAStore$")
	holder.Env = append(os.Environ(), "SENDTWICE_HOLD_STORE="+dir)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "holding\n" {
		t.Fatalf("the holding process said %q (%v)", line, err)
	}

	st, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		_ = st.Close()
		t.Fatal("a store opened a directory another process holds")
	}
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), "another process holds it") {
		t.Fatalf("the error is %q; want it to say that another process holds the directory", err)
	}
}
