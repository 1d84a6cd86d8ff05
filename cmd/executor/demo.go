package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendtwice/sendtwice/cmd/internal/demo"
	"github.com/sendtwice/sendtwice/cmd/internal/publish"
	"github.com/sendtwice/sendtwice/cmd/internal/service"
	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/document"
)

const demoHelp = `demo [--verbose] [--keep DIR] [--task-service caldav --caldav-url URL [--caldav-user USER]]
     [--keep-tasks]

Plays the whole story in a temporary directory, needing nothing but Go: an embedded NATS
server with JetStream, the fake task service, one executor, and publishers sending the seed
scenario. Steps 1 and 2 are sent by two separate publisher processes (this executable run
again as publisher send), with the task service restarted in between. Prints one table, and
under it what each row shows, and exits non-zero if any row differs from what is expected.

With --task-service caldav the executor calls a real CalDAV collection instead (the fake
task service is stopped): the same approval from two publisher processes, a changed request
under the same intent, the first task deleted and its approval sent again (answered from the
executors' intent ledger, kept in the demo's embedded server), a second intent with the same
content, tampered messages, and a reply lost after the server answered. It creates 3 tasks
(VTODOs) in the collection, under intent ids new in every run ("demo-<run id>-intent-…"), in
the scope sendtwice-demo and with titles starting "[sendtwice demo] ", deletes the first as its
owner would, and deletes the other 2 at the end, so that the collection lists what it listed
before (the table's cleanup row shows it); --keep-tasks leaves those 2 there. A CalDAV server keeps
no counters, so the table shows the receipts and the tasks the collection lists after each
step. The password comes from --caldav-password-file or $` + service.CalDAVPasswordEnv + `.

--task-service redmine is refused: Redmine's per-key locks live in the executors' intent ledger,
which needs a NATS server running before the adapter opens (use serve and probe).`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoHelp, stderr)
	verbose := fs.Bool("verbose", false, "show the components' logs")
	keep := fs.String("keep", "", "work in `DIR` and keep it, instead of a temporary directory")
	keepTasks := fs.Bool("keep-tasks", false, "with a real task service: leave the run's tasks there at the end (by default the demo deletes them)")
	ts := service.FlagsVar(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := ts.CheckForDemo(); err != nil {
		fs.Usage()
		return err
	}
	opts := demo.Options{Dir: *keep, Out: stdout, Process: sendFromProcess, KeepTasks: *keepTasks}
	if !ts.NeedsNATS() {
		svc, err := ts.OpenForDemo(ctx, 10*time.Second)
		if err != nil {
			return err
		}
		opts.Service, opts.CallTimeout = svc, 10*time.Second
	}
	if *verbose {
		log, _ := cli.NewLogger(stderr, "text", "info")
		opts.Logger = log
	}
	if *keep != "" {
		if err := os.MkdirAll(*keep, 0o755); err != nil {
			return err
		}
	}
	_, err := demo.Run(ctx, opts)
	return err
}

// sendFromProcess sends env from a separate OS process: it runs this
// executable again as publisher send ($SENDTWICE_DEMO_SENDER, see main)
// against url and reads the receipt it prints.
func sendFromProcess(ctx context.Context, url string, env []byte) (*document.Receipt, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: finding this executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "sendtwice-send-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "envelope.json")
	if err := os.WriteFile(file, env, 0o600); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "--server", url, "--envelope", file, "--wait", "20s", "--json")
	cmd.Env = append(senderEnv(os.Environ()), demoSenderEnv+"=1")
	return runSender(cmd)
}

// runSender runs cmd, a publisher send with --json, and returns the receipt
// it printed. publisher send ends with 3, 4 or 5 for a receipt that says no
// task was made or kept (idempotency_conflict, rejected, dead_lettered): that
// receipt is still the answer, for the caller to judge.
func runSender(cmd *exec.Cmd) (*document.Receipt, error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && (!errors.As(runErr, &exitErr) || !receiptExit(exitErr.ExitCode())) {
		return nil, fmt.Errorf("demo: publisher process: %w: %s", runErr, bytes.TrimSpace(errOut.Bytes()))
	}
	rc, err := document.DecodeReceipt(bytes.TrimSpace(out.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("demo: the publisher process printed no receipt (%v): %w: %s", runErr, err, bytes.TrimSpace(errOut.Bytes()))
	}
	return rc, nil
}

// receiptExit reports whether publisher send ends with code for a receipt.
func receiptExit(code int) bool {
	return code == publish.ExitConflict || code == publish.ExitRejected || code == publish.ExitDead
}

// senderEnv is env without the $NATS_… connection settings (credentials,
// TLS, inbox prefix) and the reviewer's $SENDTWICE_TRUSTED_APPROVERS: they
// are for a deployment, not for the demo's own embedded server, which the
// publisher process reaches by --server alone, and its throwaway key, which
// no trusted-approvers file names (the executor checks its signature).
func senderEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, publish.TrustedEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
