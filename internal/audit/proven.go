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
	var unproven, tools int
	for _, t := range l.Tasks {
		if t.Unproven == "" {
			continue
		}
		if _, ok := toolsTask(t, pipeline); ok {
			tools++
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
	c.fig("of which left by the demo or the probe, unproven (excluded)", tools)
}

// ownTasks are the listed tasks that stand for their keys: those the
// adapter calls proven, and those a tool left (toolsTask; pipeline as
// pipelineKeys gives it).
func ownTasks(l *TaskListing, pipeline map[string]bool) []ListedTask {
	out := make([]ListedTask, 0, len(l.Tasks))
	for _, t := range l.Tasks {
		if _, tool := toolsTask(t, pipeline); t.Unproven == "" || tool {
			out = append(out, t)
		}
	}
	return out
}
