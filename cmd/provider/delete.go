package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/provider"
)

func (c *app) delete(ctx context.Context, args []string) error {
	fs := c.flagSet("delete", "[--server URL] (--intent ID [--scope S] | --task-id ID) [--json]",
		`Deletes one task the way its owner deletes it in their list: tasks existing
goes down by one (in total and in its scope) and a delete record is kept.
The key (scope, intent id) stays, marked deleted: a resend of its approval
is answered replayed with the first task id and the deleted mark, and
nothing is created again. Name the task by its key (--intent, in --scope or
in "default") or by --task-id. Deleting an unknown task, or one already
deleted, is an error and changes nothing.
`)
	cf := c.clientFlags(fs)
	scope := fs.String("scope", "", "the `SCOPE` of the key (default \"default\")")
	intent := fs.String("intent", "", "the intent `ID` of the task's key")
	taskID := fs.String("task-id", "", "the task `ID` (fake-task-0001, ...)")
	asJSON := fs.Bool("json", false, `print {"deleted":{…},"counts":{…}}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *taskID != "" && (*intent != "" || *scope != ""):
		return usageErr("delete: give --task-id or --intent (with --scope), not both")
	case *taskID == "" && *intent == "":
		return usageErr("delete: --intent or --task-id is required")
	case *scope != "" && !provider.ValidScope(*scope):
		return usageErr("delete: --scope %q is not a scope (1 to %d bytes of a-z, 0-9, '-' and '_')", *scope, provider.MaxScopeBytes)
	}
	nc, client, err := cf.dial("delete")
	if err != nil {
		return err
	}
	defer nc.Close()
	resp, err := client.Delete(ctx, provider.DeleteRequest{Scope: *scope, IntentID: *intent, TaskID: *taskID})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(resp)
	}
	d := resp.Deleted
	_, err = fmt.Fprintf(c.stdout, "deleted %s (scope %s, intent %s); its key stays\nrequests received %d, creates executed %d, tasks existing %d\n",
		d.TaskID, d.Scope, d.IntentID, resp.Counts.RequestsReceived, resp.Counts.CreatesExecuted, resp.Counts.TasksExisting)
	return err
}
