package audit

import (
	"fmt"
	"slices"
)

// This file is the registry of the audit's checks: one table that gives
// every check its stable name, what it asserts and the function that makes
// it. Verify, a listed service's audit and VerifyRun are lists of names
// from it; a check's number in a report is its place in that list.
//
// Two more checks of what the pipeline did live outside this package,
// because they read another record: package history records every call a
// fault run makes through a task service contract, and package linearize
// decides whether that history is linearizable with respect to the
// contract (a created, replayed or conflict answer that no order of the
// calls explains). They check the same invariant as one-create-per-key
// and first-records-unchanged, from the calls' side.

// Figure is one named number a check reports.
type Figure struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Check is the result of one of the registry's checks.
type Check struct {
	// N is the check's place in its report, from 1.
	N int `json:"n"`
	// ID is the check's stable name in the registry ("counters").
	ID string `json:"id"`
	// Name says what the check asserts.
	Name       string   `json:"name"`
	OK         bool     `json:"ok"`
	Figures    []Figure `json:"figures"`
	Violations []string `json:"violations,omitempty"`
	// Notes list what a check found worth saying that is not a violation.
	Notes []string `json:"notes,omitempty"`
	// NotApplicable, when set, says why the check could not be made on
	// this task service (OK is then true: nothing was found, because
	// nothing could be looked at).
	NotApplicable string `json:"not_applicable,omitempty"`
}

// rule is one check of the registry.
type rule struct {
	// name is the check's stable name: kebab-case, never reused.
	name string
	// asserts says what the check asserts (Check.Name).
	asserts string
	// verify makes the check on the history the streams hold (VerifyWith);
	// nil for a check of one run only.
	verify func(c *Check, v *view)
	// run makes the check on one run of work (VerifyRun); nil for a check
	// of the whole history only.
	run func(c *Check, r *runView)
}

// RunCountersCheck is the name of VerifyRun's check on the service's
// counters, which a service that counts nothing cannot pass.
const RunCountersCheck = "run-counters"

// registry holds every check the audit makes (the package's doc says in
// which file each lives).
var registry = []rule{
	{name: "one-terminal-outcome", asserts: "every approval message has one terminal outcome: a terminal receipt or a dead letter, never two that contradict",
		verify: onInput(checkTerminal), run: checkRunTerminal},
	{name: "one-create-per-key", asserts: "at most one create per key (scope, intent id); its created and replayed receipts name its one task, never another key's; a deleted task's key is replayed, never created again",
		verify: checkOneCreate},
	{name: "counters", asserts: "creates executed = tasks existing + tasks deleted = keys live + keys compacted; every live key names its one task",
		verify: onInput(checkCounters)},
	{name: "requests-accounted", asserts: "requests received = receipts from the service + calls whose reply was lost",
		verify: checkRequests},
	{name: "first-records-unchanged", asserts: "no conflict changed a first record",
		verify: checkFirstRecords},
	{name: "rejected-not-called", asserts: "no rejected message reached the service",
		verify: onInput(checkRejected)},
	{name: "calls-name-messages", asserts: "every service call names a stored approval message with its scope, intent id and request digest; calls from outside the executors only as allowed",
		verify: checkCallsNameMessages},
	{name: "receipts-name-messages", asserts: "every stored receipt decodes and names a stored approval message with its scope and intent id",
		verify: checkReceiptsNameMessages},
	{name: "gate-passes", asserts: "every message that reached the service passes the gate, re-run at the time the stream stored it",
		verify: checkGate},
	{name: "one-call-per-delivery", asserts: "each delivery makes at most one call: no delivery number of a message carries two calls or exceeds the executors' delivery budget",
		verify: checkDeliveries},
	{name: "one-store", asserts: "every receipt from the task service names the audited store",
		verify: onInput(checkOneStore)},
	{name: "content-as-approved", asserts: "every created task holds its approved request's task (title, assignee, due date); no create was refused for not matching its request",
		verify: checkContent},
	{name: "as-provisioned", asserts: "the streams and the executors' consumer are as provisioning recorded them",
		verify: onInput(checkProvisioned)},
	{name: "no-foreign-records", asserts: "every dead letter decodes; no status message was stored as an approval",
		verify: onInput(checkForeign)},
	{name: "ledger-entries-approved", asserts: "every entry of the intent ledger binds its key to the request digest of an approval the stream holds, unless written before the window",
		verify: checkLedgerApproved},

	// A service that keeps no call log, audited by the tasks it lists.
	{name: "listed-one-task-per-key", asserts: "at most one task per key (scope, intent id); its created and replayed receipts name it",
		verify: checkListedOneTask},
	{name: "listed-tasks-named", asserts: "tasks existing = keys (scope, intent id) with a created or replayed receipt",
		verify: checkListedTasks},
	{name: "listed-tasks-proven", asserts: "every listed task that claims a key is the pipeline's by the adapter's proof; a task planted or edited by a user of the service is named, and stands for no key",
		verify: checkListedProven},

	// One run of work (VerifyRun).
	{name: "run-not-refused", asserts: "no message of the run was rejected or dead-lettered; every receipt decodes",
		run: checkRunNotRefused},
	{name: "run-one-create-per-key", asserts: "one created receipt per key (scope, intent id), naming the task all its receipts name",
		run: checkRunCreates},
	{name: RunCountersCheck, asserts: "creates executed and tasks existing grew by the new intents; requests received by at least the messages",
		run: checkRunCounters},
}

// verifyChecks are the checks of a service audited by its records, in
// the order Verify reports them.
var verifyChecks = []string{
	"one-terminal-outcome", "one-create-per-key", "counters", "requests-accounted", "first-records-unchanged",
	"rejected-not-called", "calls-name-messages", "receipts-name-messages", "gate-passes", "one-call-per-delivery",
	"one-store", "content-as-approved", "as-provisioned", "no-foreign-records", "ledger-entries-approved",
}

// listedChecks are the checks of a service audited by the tasks it lists
// (listed.go), in the order Verify reports them: those of a service's
// records, with its own two in place of one-create-per-key and counters,
// and listed-tasks-proven last.
var listedChecks = append(replaced(verifyChecks, map[string]string{
	"one-create-per-key": "listed-one-task-per-key",
	"counters":           "listed-tasks-named",
}), "listed-tasks-proven")

// runChecks are the checks of one run of work (VerifyRun).
var runChecks = []string{"one-terminal-outcome", "run-not-refused", "run-one-create-per-key", RunCountersCheck}

// replaced is names with each name that instead names replaced by it.
func replaced(names []string, instead map[string]string) []string {
	out := slices.Clone(names)
	for i, name := range out {
		if by, ok := instead[name]; ok {
			out[i] = by
		}
	}
	return out
}

// onInput adapts a check that reads only the Input to the registry's
// form, a check of the view.
func onInput(check func(c *Check, in *Input)) func(*Check, *view) {
	return func(c *Check, v *view) { check(c, v.in) }
}

// ruleNamed returns the registry's check named name; a name the registry
// does not hold is a mistake in this package's lists.
func ruleNamed(name string) rule {
	i := slices.IndexFunc(registry, func(r rule) bool { return r.name == name })
	if i < 0 {
		panic(fmt.Sprintf("audit: no check named %q in the registry", name))
	}
	return registry[i]
}

// makeChecks makes the checks named, in order, numbered from 1: fill
// makes each one, filling in its figures and violations.
func makeChecks(names []string, fill func(r rule, c *Check)) []Check {
	out := make([]Check, len(names))
	for i, name := range names {
		r := ruleNamed(name)
		out[i] = Check{N: i + 1, ID: r.name, Name: r.asserts, OK: true}
		fill(r, &out[i])
	}
	return out
}

// CheckNames lists the names of every check in the registry, in order.
func CheckNames() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.name
	}
	return out
}

// maxListed bounds the violations and the notes listed per check.
const maxListed = 20

func (c *Check) fig(name string, v int) { c.Figures = append(c.Figures, Figure{name, int64(v)}) }

func (c *Check) violate(format string, args ...any) {
	c.OK = false
	c.Violations = appendListed(c.Violations, format, args...)
}

func (c *Check) note(format string, args ...any) {
	c.Notes = appendListed(c.Notes, format, args...)
}

// appendListed appends the line format says to list, up to maxListed
// lines, and then once that more were not listed.
func appendListed(list []string, format string, args ...any) []string {
	switch {
	case len(list) < maxListed:
		return append(list, fmt.Sprintf(format, args...))
	case len(list) == maxListed:
		return append(list, "… (more not listed)")
	}
	return list
}
