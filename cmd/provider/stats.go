package main

import (
	"context"
	"encoding/json"
	"fmt"
)

func (c *cli) stats(ctx context.Context, args []string) error {
	fs := c.flagSet("stats", "[--server URL] [--json]",
		`Prints the service's three counters: requests received (every well-formed
create call), creates executed, and tasks existing. They are exact and
survive restarts.
`)
	cf := c.clientFlags(fs)
	asJSON := fs.Bool("json", false, `print {"requests_received":…,"creates_executed":…,"tasks_existing":…}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	nc, client, err := cf.dial("stats")
	if err != nil {
		return err
	}
	defer nc.Close()
	counts, err := client.Stats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(counts)
	}
	_, err = fmt.Fprintf(c.stdout, "requests received %d, creates executed %d, tasks existing %d\n",
		counts.RequestsReceived, counts.CreatesExecuted, counts.TasksExisting)
	return err
}
