package main

import (
	"context"
	"encoding/json"

	"github.com/sendtwice/sendtwice/internal/provider"
)

func (c *app) records(ctx context.Context, args []string) error {
	fs := c.flagSet("records", "[--server URL] --kind requests|creates|tasks|intents|deletes [--scope S] [--intent ID] [--after N] [--limit N]",
		`Prints audit records of the service as JSON lines, in sequence order:
  requests  every request received, with its outcome and task id
  creates   every create executed
  tasks     the tasks that exist
  intents   per key (scope, intent id), the first digest and result, how
            long the key is kept and whether its task was deleted
  deletes   every task deleted by its owner
With --scope only the records of that scope are printed; with --intent only
those of the key (--scope, or "default", and the intent id).
`)
	cf := c.clientFlags(fs)
	kind := fs.String("kind", "", "the record `KIND`: requests, creates, tasks, intents or deletes (required)")
	scope := fs.String("scope", "", "only records of this `SCOPE`")
	intent := fs.String("intent", "", "only records of this intent `ID` (in --scope, or in \"default\")")
	after := fs.Uint64("after", 0, "start after the sequence number `N`")
	limit := fs.Int("limit", 0, "print at most `N` records (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch *kind {
	case provider.RecordRequests, provider.RecordCreates, provider.RecordTasks, provider.RecordIntents, provider.RecordDeletes:
	case "":
		return usageErr("records: --kind is required")
	default:
		return usageErr("records: --kind %q: want requests, creates, tasks, intents or deletes", *kind)
	}
	if *scope != "" && !provider.ValidScope(*scope) {
		return usageErr("records: --scope %q is not a scope (1 to %d bytes of a-z, 0-9, '-' and '_')", *scope, provider.MaxScopeBytes)
	}
	if *limit < 0 {
		return usageErr("records: --limit must not be negative")
	}
	nc, client, err := cf.dial("records")
	if err != nil {
		return err
	}
	defer nc.Close()

	req := provider.RecordsRequest{Kind: *kind, Scope: *scope, IntentID: *intent, AfterSeq: *after}
	return client.EachRecord(ctx, req, *limit, json.NewEncoder(c.stdout).Encode)
}
