package main

import (
	"context"
	"encoding/json"
	"fmt"
)

func (c *app) stats(ctx context.Context, args []string) error {
	fs := c.flagSet("stats", "[--server URL] [--json]",
		`Prints the service's three counters: requests received (every well-formed
create call), creates executed, and tasks existing. They are exact and
survive restarts. Then the id of the store that answered and which instance
(micro id, host, pid) it was; the keys (scope, intent id) kept and
compacted, the tasks deleted by their owners and the request and create
records retired; and one line per scope with its counters.
`)
	cf := c.clientFlags(fs)
	asJSON := fs.Bool("json", false, `print {"requests_received":…,"creates_executed":…,"tasks_existing":…,"store_id":…,"instance":…,"host":…,"pid":…,"keys":{…},"scopes":[…]}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	nc, client, err := cf.dial("stats")
	if err != nil {
		return err
	}
	defer nc.Close()
	info, err := client.Info(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(info)
	}
	_, err = fmt.Fprintf(c.stdout, "requests received %d, creates executed %d, tasks existing %d\nstore %s, answered by instance %s on host %s, pid %d\n",
		info.RequestsReceived, info.CreatesExecuted, info.TasksExisting, info.StoreID, info.Instance, info.Host, info.PID)
	if err != nil {
		return err
	}
	k := info.Keys
	if _, err := fmt.Fprintf(c.stdout, "keys live %d, keys compacted %d, tasks deleted %d, records retired %d\n",
		k.Live, k.Compacted, k.TasksDeleted, k.RecordsRetired); err != nil {
		return err
	}
	for _, sc := range info.Scopes {
		if _, err := fmt.Fprintf(c.stdout, "scope %s: requests received %d, creates executed %d, tasks existing %d, keys live %d, keys compacted %d, tasks deleted %d\n",
			sc.Scope, sc.RequestsReceived, sc.CreatesExecuted, sc.TasksExisting, sc.KeysLive, sc.KeysCompacted, sc.TasksDeleted); err != nil {
			return err
		}
	}
	return nil
}
