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
	kind := fs.String("kind", "", "record kind: requests, creates, tasks, intents or deletes (required)")
	scope := fs.String("scope", "", "only records of this scope")
	intent := fs.String("intent", "", "only records of this intent id (in --scope, or in \"default\")")
	after := fs.Uint64("after", 0, "start after this sequence number")
	limit := fs.Int("limit", 0, "print at most N records (0: all)")
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

	enc := json.NewEncoder(c.stdout)
	printed := 0
	req := provider.RecordsRequest{Kind: *kind, Scope: *scope, IntentID: *intent, AfterSeq: *after}
	for {
		req.Limit = provider.MaxRecordsLimit
		if *limit > 0 {
			req.Limit = min(*limit-printed, provider.MaxRecordsLimit)
		}
		page, err := client.Records(ctx, req)
		if err != nil {
			return err
		}
		for _, rec := range pageRecords(page) {
			if err := enc.Encode(rec); err != nil {
				return err
			}
			printed++
		}
		if page.NextSeq == 0 || (*limit > 0 && printed >= *limit) {
			return nil
		}
		req.AfterSeq = page.NextSeq
	}
}

// pageRecords returns the records of a page, whatever their kind.
func pageRecords(p provider.RecordsResponse) []any {
	var out []any
	for _, r := range p.Requests {
		out = append(out, r)
	}
	for _, r := range p.Creates {
		out = append(out, r)
	}
	for _, r := range p.Tasks {
		out = append(out, r)
	}
	for _, r := range p.Intents {
		out = append(out, r)
	}
	for _, r := range p.Deletes {
		out = append(out, r)
	}
	return out
}
