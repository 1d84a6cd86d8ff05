package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sendtwice/sendtwice/internal/audit"
	"github.com/sendtwice/sendtwice/internal/cli"
)

const verifyHelp = `verify [--server URL] [--json]

Reads the APPROVALS stream, the receipts, the dead letters and the task service's records,
and checks that nothing was lost or done twice:
  1. every approval message has a terminal receipt or a dead letter;
  2. at most one create per intent id, and its created/replayed receipts name one task;
  3. creates executed = tasks existing = intents with a create;
  4. requests received = receipts from the service + calls whose reply was lost;
  5. no conflict changed a first record;
  6. no rejected message reached the service.
Prints each check with its figures. Exit status 0 when all hold, 1 on any violation.
It only reads; running it changes nothing. Run it once the executors have drained.`

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", verifyHelp, stderr)
	conn := cli.ConnFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up reading after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	nc, err := conn.Connect("executor-verify", nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	in, err := audit.Load(ctx, nc)
	if err != nil {
		return err
	}
	rep := audit.Verify(in)
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printReport(stdout, rep)
	}
	if !rep.OK {
		return fmt.Errorf("verify: a check failed: %w", errSilent)
	}
	return nil
}

func printReport(w io.Writer, rep audit.Report) {
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %d. %s\n", mark, c.N, c.Name)
		for _, f := range c.Figures {
			fmt.Fprintf(w, "       %-50s %d\n", f.Name, f.Value)
		}
		for _, v := range c.Violations {
			fmt.Fprintf(w, "       ! %s\n", v)
		}
	}
	if rep.OK {
		fmt.Fprintln(w, "verify: all checks hold")
	} else {
		fmt.Fprintln(w, "verify: VIOLATIONS FOUND")
	}
}
