package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// This file audits a task service that keeps no log of calls and no
// counters, only its tasks: a CalDAV collection, a Redmine project's marked
// issues. What the audit reads of it
// is a listing of the tasks it holds; the receipts say the rest. The checks
// that need the service's record of every call (requests-accounted,
// first-records-unchanged, calls-name-messages, one-call-per-delivery), and
// the comparison of each task's content with its approved request
// (content-as-approved), cannot be made and are reported as not
// applicable, with the reason, rather than passed (notListed).

// ListedTask is one task a listing shows (taskservice.ListedTask).
type ListedTask = taskservice.ListedTask

// TaskListing is what a task service without a call log shows of itself
// (taskservice.Listing, which a taskservice.Lister returns).
type TaskListing = taskservice.Listing

// notListed says why a check of listedChecks cannot be made on a listed
// service; noCallLog stands for the listing's NoCallLog.
var notListed = map[string]string{
	"requests-accounted":      noCallLog,
	"first-records-unchanged": noCallLog,
	"calls-name-messages":     noCallLog,
	"one-call-per-delivery":   noCallLog,
	"content-as-approved":     "the listing shows which intents have a task, not the tasks' content",
}

// noCallLog is the reason of the checks that need the service's record of
// every call, when the listing gives none.
const noCallLog = "the task service keeps no call log"

// verifyListed makes listedChecks on an input whose service is known by
// its listing only.
func verifyListed(v *view) []Check {
	return makeChecks(listedChecks, func(r rule, c *Check) {
		switch why, na := notListed[r.name]; {
		case !na:
			r.verify(c, v)
		case why == noCallLog && v.in.Listing.NoCallLog != "":
			c.NotApplicable = v.in.Listing.NoCallLog
		default:
			c.NotApplicable = why
		}
	})
}

// tasksByKey groups the listed tasks that stand for their keys (ownTasks)
// by key (scope, intent id), named as key.String names it: an unproven task
// not left by a tool is not its key's task (listed-tasks-proven names it).
func tasksByKey(v *view, pipeline map[string]bool) map[string][]ListedTask {
	out := map[string][]ListedTask{}
	for _, t := range ownTasks(v, pipeline) {
		k := keyOf(t.Scope, t.IntentID).String()
		out[k] = append(out[k], t)
	}
	return out
}

func describeTasks(ts []ListedTask) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		p := "task " + t.TaskID
		if t.Where != "" {
			p += " at " + t.Where
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// checkListedOneTask makes listed-one-task-per-key, for a listed service: per
// key (scope, intent id) at most one task, no task id held by two keys, at most
// one created receipt, and every created or replayed receipt names the task the
// service holds for its key.
func checkListedOneTask(c *Check, v *view) {
	in, l := v.in, v.in.Listing
	pipeline := pipelineKeys(in, v)
	tasks := tasksByKey(v, pipeline)
	keys := sortedKeys(tasks)
	var doubled int
	for _, k := range keys {
		if ts := tasks[k]; len(ts) > 1 {
			doubled++
			c.violate("%s has %d tasks in %s: %s", k, len(ts), l.Name, describeTasks(ts))
		}
	}
	holders := map[string][]string{}
	for _, t := range ownTasks(v, pipeline) {
		if k := keyOf(t.Scope, t.IntentID).String(); !slices.Contains(holders[t.TaskID], k) {
			holders[t.TaskID] = append(holders[t.TaskID], k)
		}
	}
	for _, id := range sortedKeys(holders) {
		if hs := holders[id]; len(hs) > 1 {
			slices.Sort(hs)
			c.violate("task id %s is held by tasks of %d keys: %s", id, len(hs), strings.Join(hs, ", "))
		}
	}
	type delivery struct{ seq, delivered uint64 }
	created := map[string]map[delivery]bool{}
	named := map[string]string{}
	var checked, gone int
	for _, seq := range sortedKeys(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if r.Outcome != document.OutcomeCreated && r.Outcome != document.OutcomeReplayed || r.IntentID == nil || r.TaskID == nil {
				continue
			}
			checked++
			intent, task := receiptKey(r).String(), *r.TaskID
			if r.Outcome == document.OutcomeCreated {
				if created[intent] == nil {
					created[intent] = map[delivery]bool{}
				}
				created[intent][delivery{seq, r.Delivery.Delivered}] = true
			}
			if prev, ok := named[intent]; ok && prev != task {
				c.violate("%s: receipts name tasks %s and %s", intent, prev, task)
			}
			named[intent] = task
			ts, held := tasks[intent]
			switch {
			case !held:
				gone++
			case !slices.ContainsFunc(ts, func(t ListedTask) bool { return t.TaskID == task }):
				c.violate("%s: receipt %s of message %d (%s) names task %s, but %s holds %s for it",
					intent, r.ReceiptID, seq, r.Outcome, task, l.Name, describeTasks(ts))
			}
		}
	}
	var again int
	for _, intent := range sortedKeys(created) {
		if n := len(created[intent]); n > 1 {
			again++
			c.violate("%s has created receipts from %d deliveries: the service created its task %d times "+
				"(a task deleted in the service, then created again by a resend, is one way)", intent, n, n)
		}
	}
	c.fig("tasks carrying an intent id", len(l.Tasks))
	c.fig("keys with a task", len(tasks))
	c.fig("keys with more than one task", doubled)
	c.fig("created and replayed receipts checked", checked)
	c.fig("of which for a key whose task is gone (see 3)", gone)
	c.fig("keys created more than once, by their receipts", again)
}

// pipelineKeys are the keys (scope, intent id) the audited pipeline
// carried, named as key.String names them: those of its messages and of its
// receipts, whatever their outcome.
func pipelineKeys(in *Input, v *view) map[string]bool {
	out := map[string]bool{}
	for _, m := range v.msgs {
		if m.id.IntentID != "" {
			out[keyOf(m.id.Scope, m.id.IntentID).String()] = true
		}
	}
	for _, rs := range in.Receipts {
		for _, r := range rs {
			if r.IntentID != nil && *r.IntentID != "" {
				out[receiptKey(r).String()] = true
			}
		}
	}
	return out
}

// checkListedTasks makes listed-tasks-named, for a listed service: the tasks
// existing are the keys (scope, intent id) whose receipts say created or
// replayed. A task no such receipt names is a violation unless it is accounted
// for: left by the probe or the demo (in their scopes and titled with their
// prefixes, Marks, for a key no message or receipt of the audited pipeline
// names; or an older probe's, by its intent ids), for a message that was
// dead-lettered (a call may have created it before its reply was lost), or
// possibly for a message no longer in the stream. A task in a tool's scope
// without the tool's title, or for a key the pipeline carried, is audited as
// the pipeline's: the scopes are not reserved, anyone may send a request in
// them. An intent whose task is gone was deleted in the service since, by a
// user or another client: reported, not a violation, since a task service's
// users may delete their tasks.
func checkListedTasks(c *Check, v *view) {
	in := v.in
	l := in.Listing
	carried := pipelineKeys(in, v)
	tasks := tasksByKey(v, carried)
	withReceipt := map[string]string{}
	for _, seq := range sortedKeys(in.Receipts) {
		for _, r := range in.Receipts[seq] {
			if (r.Outcome == document.OutcomeCreated || r.Outcome == document.OutcomeReplayed) && r.IntentID != nil {
				withReceipt[receiptKey(r).String()] = deref(r.TaskID)
			}
		}
	}
	deadIntent := map[string]bool{}
	for seq := range in.DeadLetters {
		if m, ok := v.msgs[seq]; ok && m.id.IntentID != "" {
			deadIntent[keyOf(m.id.Scope, m.id.IntentID).String()] = true
		}
	}
	var gone []string
	for _, intent := range sortedKeys(withReceipt) {
		if _, ok := tasks[intent]; !ok {
			gone = append(gone, intent)
		}
	}
	for _, intent := range gone {
		c.note("%s: its receipts name task %s, which %s no longer holds: deleted in the service since",
			intent, withReceipt[intent], l.Name)
	}
	n := unnamedTally{left: map[string]int{}}
	for _, intent := range sortedKeys(tasks) {
		if _, ok := withReceipt[intent]; !ok {
			n.account(c, v, intent, tasks[intent], carried, deadIntent[intent])
		}
	}
	c.fig("items in the service, ours or not", l.Items)
	c.fig("tasks existing (carrying an intent id)", len(l.Tasks))
	c.fig("keys with a task", len(tasks))
	c.fig("keys with a created or replayed receipt", len(withReceipt))
	c.fig("of which the task is gone (deleted since; noted)", len(gone))
	byTools := 0
	for _, left := range n.left {
		byTools += left
	}
	c.fig("tasks no receipt names", n.probed+n.dead+n.older+n.unnamed+byTools)
	for _, m := range Marks {
		c.fig(fmt.Sprintf("of which left by %s (scope %s; excluded)", m.By, m.Scope), n.left[m.Scope])
	}
	c.fig("of which made by an older executor probe, in the default scope (excluded)", n.probed)
	c.fig("of which for a dead-lettered message", n.dead)
	c.fig("of which possibly for a message before the window", n.older)
	c.fig("of which unaccounted for", n.unnamed)
}

// unnamedTally counts the tasks of a listed service that no created or
// replayed receipt names, by why: left by a tool (by its scope), made by
// an older probe, for a dead-lettered message, possibly for a message
// before the window, or unaccounted for.
type unnamedTally struct {
	left                         map[string]int
	probed, dead, older, unnamed int
}

// account accounts for the tasks ts of key intent, which no created or
// replayed receipt names; carried are the keys the pipeline carried, dead
// says whether a message of the key was dead-lettered.
func (n *unnamedTally) account(c *Check, v *view, intent string, ts []ListedTask, carried map[string]bool, dead bool) {
	if m, ok := toolsTasks(ts, carried); ok {
		// A tool's task (the probe's, the demo's), in its own scope and
		// titled as its: listed apart, not the audited pipeline's. Two
		// for one key are still listed-one-task-per-key's violation.
		n.left[m.Scope] += len(ts)
		c.note("%s: %s left by %s", intent, describeTasks(ts), m.By)
		return
	}
	switch {
	case keyOf(ts[0].Scope, ts[0].IntentID).scope == document.DefaultScope && strings.HasPrefix(ts[0].IntentID, servicetest.Prefix) && !carried[intent]:
		// An older probe's, in the default scope, for a key the pipeline
		// never carried.
		n.probed += len(ts)
	case dead:
		n.dead += len(ts)
		c.note("%s: %s exists, and its message was dead-lettered: a call created it before its reply was lost; a redrive replays it", intent, describeTasks(ts))
	case v.first > 1:
		n.older += len(ts)
		c.note("%s: no receipt names %s; the stream no longer holds its messages before sequence %d, which may have made it", intent, describeTasks(ts), v.first)
	default:
		n.unnamed += len(ts)
		c.violate("%s: %s exists, but no created or replayed receipt names it and no message of it was dead-lettered: it was made outside the pipeline%s",
			intent, describeTasks(ts), notTools(ts[0].Scope, carried[intent]))
	}
}

// notTools says, for the report, why a task in a tool's scope is not the
// tool's; "" for a task in no tool's scope.
func notTools(scope string, carried bool) string {
	m, ok := MarkOf(scope)
	switch {
	case !ok:
		return ""
	case carried:
		return fmt.Sprintf(" (in the scope of %s, but the audited pipeline carried this key: audited as the pipeline's)", m.By)
	default:
		return fmt.Sprintf(" (in the scope of %s, but not titled %q as its tasks are)", m.By, m.TitlePrefix)
	}
}
