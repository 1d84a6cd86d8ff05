package audit

// This file holds listed-tasks-proven, for a service audited by the tasks
// it lists: every task that claims a key (scope, intent id) is the
// pipeline's, by the adapter's proof (a CalDAV resource's tag under the
// deployment's mark key; a Redmine issue's tagged mark and author). A task
// planted or edited by a user of the service claims a key without it: it is
// named here, with where it is and why, and the other listed checks leave
// it out (tasksByKey), so that it neither stands for its key's task nor
// hides the real one. A task the demo or the probe left (toolsTask: in its
// scope, titled as its tasks are, for a key the pipeline never carried) is
// made under the tool's own key or none, never the deployment's: it is
// counted apart, and audited as the tool's by the other checks.

// checkListedProven makes listed-tasks-proven.
func checkListedProven(c *Check, v *view) {
	l := v.in.Listing
	pipeline := pipelineKeys(v.in, v)
	var unproven, tools, before int
	for _, t := range l.Tasks {
		if t.Unproven == "" {
			continue
		}
		if _, ok := toolsTask(t, pipeline); ok {
			tools++
			continue
		}
		if v.vouched(t) {
			before++
			continue
		}
		unproven++
		where := ""
		if t.Where != "" {
			where = " at " + t.Where
		}
		c.violate("task %s%s in %s claims %s but is not the pipeline's: %s", t.TaskID, where, l.Name, keyOf(t.Scope, t.IntentID), t.Unproven)
	}
	c.fig("tasks carrying an intent id", len(l.Tasks))
	c.fig("of which not proven to be the pipeline's", unproven)
	c.fig("of which made before the mark key, bound to their key by the intent ledger (excluded)", before)
	c.fig("of which left by the demo or the probe, unproven (excluded)", tools)
}

// vouched reports whether the intent ledger binds t's key to t's request
// digest and task id: a task made before the deployment's mark key, which
// its first resend proves (taskservice.LegacyProver). The ledger's
// bindings are gathered once per view.
func (v *view) vouched(t ListedTask) bool {
	if v.ledgerBinds == nil {
		v.ledgerBinds = map[ListedTask]bool{}
		if l := v.in.Ledger; l != nil {
			for _, s := range l.Entries {
				if e := s.Entry; s.Bad == "" {
					v.ledgerBinds[binding(e.Scope, e.IntentID, e.RequestDigest, e.TaskID)] = true
				}
			}
		}
	}
	return t.RequestDigest != "" && v.ledgerBinds[binding(t.Scope, t.IntentID, t.RequestDigest, t.TaskID)]
}

// binding is what a ledger entry binds, as a map key: its key (the default
// scope for none), request digest and task id.
func binding(scope, intent, digest, task string) ListedTask {
	return ListedTask{Scope: keyOf(scope, intent).scope, IntentID: intent, RequestDigest: digest, TaskID: task}
}

// ownTasks are the listed tasks that stand for their keys: those the
// adapter calls proven, those the intent ledger binds to their keys
// (vouched), and those a tool left (toolsTask; pipeline as pipelineKeys
// gives it).
func ownTasks(v *view, pipeline map[string]bool) []ListedTask {
	l := v.in.Listing
	out := make([]ListedTask, 0, len(l.Tasks))
	for _, t := range l.Tasks {
		if _, tool := toolsTask(t, pipeline); t.Unproven == "" || tool || v.vouched(t) {
			out = append(out, t)
		}
	}
	return out
}
