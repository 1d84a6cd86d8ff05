package audit

// This file holds listed-tasks-proven, for a service audited by the tasks
// it lists: every task that claims a key (scope, intent id) is the
// pipeline's, by the adapter's proof (a CalDAV resource's tag under the
// deployment's mark key; a Redmine issue's tagged mark and author). A task
// planted or edited by a user of the service claims a key without it: it is
// named here, with where it is and why, and the other listed checks leave
// it out (tasksByKey), so that it neither stands for its key's task nor
// hides the real one.

// checkListedProven makes listed-tasks-proven.
func checkListedProven(c *Check, in *Input) {
	l := in.Listing
	var unproven int
	for _, t := range l.Tasks {
		if t.Unproven == "" {
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
}

// provenTasks are the listed tasks the adapter did not call unproven.
func provenTasks(l *TaskListing) []ListedTask {
	out := make([]ListedTask, 0, len(l.Tasks))
	for _, t := range l.Tasks {
		if t.Unproven == "" {
			out = append(out, t)
		}
	}
	return out
}
