// Command bench measures the whole pipeline under load: the durable
// throughput of a backlog drain or the publish→receipt latency of a live
// run, beside references measured in the same run (naive and batched
// JetStream, Pebble alone, JetStream with a PostgreSQL ledger), and checks
// that every approval has its receipt and that nothing was lost or doubled.
// It runs against a deployment (--server) or starts its own NATS server and
// task service (--embedded); the measuring is internal/bench's.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	cli.Main("bench", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}

// run is the bench command: [backlog|live] and its flags, ab and two
// build directories, or --version.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "-version", "--version", "version":
			fmt.Fprintln(stdout, "bench", cli.Version())
			return nil
		case "ab":
			return runAB(ctx, args[1:], stdout, stderr)
		}
	}
	return runBench(ctx, args, stdout, stderr)
}
