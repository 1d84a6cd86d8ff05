package audit

import (
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/taskservice/servicetest"
)

// The tools of this project that create tasks of their own in a task
// service (the probe, the demo) make them in scopes of their own, with a
// title that says so. The audit tells their tasks apart from the audited
// pipeline's: listed, counted, never taken for tasks made outside the
// pipeline; two tasks for one key are still a violation in their scopes.
//
// Nothing reserves those scopes: a request in them passes the gate like
// any other. So a task is a tool's only when it carries the whole mark,
// scope and title, and no message or receipt of the audited pipeline names
// its key: a key the pipeline carried is the pipeline's, whatever its
// scope, and is audited as such.

// DemoScope is the caller scope of the demo's requests against a real
// task service, and DemoTitlePrefix starts their titles (package demo
// uses them).
const (
	DemoScope       = "sendtwice-demo"
	DemoTitlePrefix = "[sendtwice demo] "
)

// Mark is the mark of the tasks one tool makes: their scope and the start
// of their titles.
type Mark struct {
	// By names the tool: "the probe", "the demo".
	By          string
	Scope       string
	TitlePrefix string
}

// Marks are the tools' marks.
var Marks = []Mark{
	{By: "the probe", Scope: servicetest.Scope, TitlePrefix: servicetest.TitlePrefix},
	{By: "the demo", Scope: DemoScope, TitlePrefix: DemoTitlePrefix},
}

// MarkOf returns the mark of the tool whose scope is scope, and whether
// there is one. A task in that scope is the tool's only if it also
// carries the mark's title (Carries).
func MarkOf(scope string) (Mark, bool) {
	for _, m := range Marks {
		if m.Scope == scope {
			return m, true
		}
	}
	return Mark{}, false
}

// Carries says whether t carries m: in m's scope, titled with m's prefix.
func (m Mark) Carries(t ListedTask) bool {
	return t.Scope == m.Scope && strings.HasPrefix(t.Title, m.TitlePrefix)
}

// toolsTask returns the tool that left t and whether one did: t carries
// its mark, and the audited pipeline never carried t's key (pipeline, as
// key.String names keys; nil when no stream was read).
func toolsTask(t ListedTask, pipeline map[string]bool) (Mark, bool) {
	m, ok := MarkOf(t.Scope)
	if !ok || !m.Carries(t) || pipeline[keyOf(t.Scope, t.IntentID).String()] {
		return Mark{}, false
	}
	return m, true
}

// toolsTasks returns the tool that left the tasks ts of one key, and
// whether one did: every one of them is the tool's (toolsTask).
func toolsTasks(ts []ListedTask, pipeline map[string]bool) (Mark, bool) {
	var by Mark
	for i, t := range ts {
		m, ok := toolsTask(t, pipeline)
		if !ok || i > 0 && m != by {
			return Mark{}, false
		}
		by = m
	}
	return by, len(ts) > 0
}

// ListingSummary sums a listing up for status: its tasks per mark and the
// audited pipeline's.
type ListingSummary struct {
	// Items counts everything the service holds, tasks of ours or not.
	Items int `json:"items"`
	// Tasks counts the tasks that carry an intent id; Pipeline those of the
	// pipeline (all but the tools' tasks, Left).
	Tasks    int `json:"tasks"`
	Pipeline int `json:"pipeline_tasks"`
	// Left counts the tasks left by each tool, by its scope: those that
	// carry its mark, scope and title.
	Left map[string]int `json:"left_by_scope"`
}

// Summarize sums l up, without a stream to read: a task that carries a
// tool's mark is counted as the tool's.
func Summarize(l TaskListing) ListingSummary { return summarize(l, nil) }

// summarize sums l up; a task whose key the audited pipeline carried
// (pipeline) is the pipeline's, whatever its mark.
func summarize(l TaskListing, pipeline map[string]bool) ListingSummary {
	s := ListingSummary{Items: l.Items, Tasks: len(l.Tasks), Left: map[string]int{}}
	for _, m := range Marks {
		s.Left[m.Scope] = 0
	}
	for _, t := range l.Tasks {
		if m, ok := toolsTask(t, pipeline); ok {
			s.Left[m.Scope]++
		} else {
			s.Pipeline++
		}
	}
	return s
}

// LeftText says how many tasks each tool left: "left by the probe 0, by
// the demo 2".
func (s ListingSummary) LeftText() string {
	parts := make([]string, 0, len(Marks))
	for i, m := range Marks {
		by := "by " + m.By
		if i == 0 {
			by = "left " + by
		}
		parts = append(parts, fmt.Sprintf("%s %d", by, s.Left[m.Scope]))
	}
	return strings.Join(parts, ", ")
}

// String says the summary on one line: "3 carrying an intent id: 1 of
// the pipeline; left by the probe 1, by the demo 1; 4 items in all".
func (s ListingSummary) String() string {
	items := fmt.Sprintf("%d items in all", s.Items)
	if s.Items == 1 {
		items = "1 item in all"
	}
	return fmt.Sprintf("%d carrying an intent id: %d of the pipeline; %s; %s", s.Tasks, s.Pipeline, s.LeftText(), items)
}
