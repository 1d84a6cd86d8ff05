// Command provider runs and inspects the fake task service: a NATS service
// over a Pebble database that creates tasks idempotently by intent id and
// counts requests received, creates executed and tasks existing.
//
// Usage:
//
//	provider serve   [--server URL] --data DIR [--allow-faults]
//	provider stats   [--server URL] [--json]
//	provider records [--server URL] --kind requests|creates|tasks|intents [--intent ID] [--after N] [--limit N]
//	provider fault   [--server URL] --drop-replies N
//	provider --version
//
// The NATS server defaults to $NATS_URL, else nats://127.0.0.1:4222.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "provider: %v: shutting down (send it again to exit at once)\n", sig)
		cancel()
		sig = <-sigs
		fmt.Fprintf(os.Stderr, "provider: %v again: exiting at once\n", sig)
		os.Exit(130)
	}()

	err := run(ctx, os.Args[1:])
	cancel()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

// run runs one subcommand with the process's standard streams and
// environment.
func run(ctx context.Context, args []string) error {
	return newCLI(os.Stdout, os.Stderr, os.Getenv).run(ctx, args)
}
