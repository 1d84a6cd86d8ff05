// Command provider runs and inspects the fake task service: a NATS service
// over a Pebble database that creates tasks idempotently by (scope, intent
// id) and counts requests received, creates executed and tasks existing.
//
// Usage:
//
//	provider serve   [--server URL] --data DIR
//	provider adopt   [--server URL] --data DIR --replace STORE_ID
//	provider records [--server URL] --kind requests|creates|tasks|intents|deletes [--scope S] [--intent ID] [--after N] [--limit N]
//	provider delete  [--server URL] (--intent ID [--scope S] | --task-id ID)
//	provider --version
//
// Its counters are shown by executor status. The NATS server defaults to
// $NATS_URL, else nats://127.0.0.1:4222.
package main

import (
	"context"
	"os"

	"github.com/sendtwice/sendtwice/internal/cli"
)

func main() {
	cli.Main("provider", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

// run runs one subcommand with the process's standard streams and
// environment.
func run(ctx context.Context, args []string) error {
	return newApp(os.Stdout, os.Stderr, os.Getenv).run(ctx, args)
}
