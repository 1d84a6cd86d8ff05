package audit

import (
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/internal/probe"
)

// The tools of this project that create tasks of their own in a task
// service (the probe, the demo) make them in scopes of their own, with a
// title that says so. The audit tells their tasks apart from the audited
// pipeline's: listed, counted, never taken for tasks made outside the
// pipeline; two tasks for one key are still a violation in their scopes.

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
	{By: "the probe", Scope: probe.Scope, TitlePrefix: probe.TitlePrefix},
	{By: "the demo", Scope: DemoScope, TitlePrefix: DemoTitlePrefix},
}

// MarkOf returns the mark of a task in scope, and whether it has one.
func MarkOf(scope string) (Mark, bool) {
	for _, m := range Marks {
		if m.Scope == scope {
			return m, true
		}
	}
	return Mark{}, false
}

// ListingSummary sums a listing up for status: its tasks per mark and the
// audited pipeline's.
type ListingSummary struct {
	// Items counts everything the service holds, tasks of ours or not.
	Items int `json:"items"`
	// Tasks counts the tasks that carry an intent id; Pipeline those of the
	// pipeline (in no tool's scope).
	Tasks    int `json:"tasks"`
	Pipeline int `json:"pipeline_tasks"`
	// Left counts the tasks left by each tool, by its scope.
	Left map[string]int `json:"left_by_scope"`
}

// Summarize sums l up.
func Summarize(l TaskListing) ListingSummary {
	s := ListingSummary{Items: l.Items, Tasks: len(l.Tasks), Left: map[string]int{}}
	for _, m := range Marks {
		s.Left[m.Scope] = 0
	}
	for _, t := range l.Tasks {
		if m, ok := MarkOf(t.Scope); ok {
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
