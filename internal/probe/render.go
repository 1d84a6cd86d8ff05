package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the report as a table, what each row saw, and the
// verdict.
func WriteText(w io.Writer, rep *Report) error {
	var b strings.Builder
	scope := rep.Scope
	if scope == "" {
		scope = "not stated"
	}
	fmt.Fprintf(&b, "task service: %s (key scope: %s)\n", rep.Target, scope)
	if rep.Class != "" {
		fmt.Fprintf(&b, "class: %s\n", rep.Class)
	}
	fmt.Fprintf(&b, "run: intent ids %s*, %d create calls, %d at once in the concurrent row\n\n", rep.Prefix, rep.Calls, rep.Concurrency)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUESTION\tHOW IT IS MEASURED\tANSWER\tSTATUS")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Question, r.Method, r.Answer, r.Status)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("probe: rendering the table: %w", err)
	}
	b.WriteString("\nseen:\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "  %s: %s\n", r.Question, r.Seen)
	}
	fmt.Fprintf(&b, "\ncleanup: %s\n", rep.Cleanup)
	fmt.Fprintf(&b, "\nverdict: %s\n", rep.Verdict.Headline)
	for _, r := range rep.Rows {
		switch r.Status {
		case Unsafe:
			fmt.Fprintf(&b, "  - unsafe: %s (%s)\n    fix: %s\n", r.Consequence, r.Question, r.Fix)
		case Caveat:
			fmt.Fprintf(&b, "  - caveat: %s (%s)\n    fix: %s\n", r.Consequence, r.Question, r.Fix)
		case Unknown:
			fmt.Fprintf(&b, "  - not measured: %s\n", r.Question)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("probe: writing the report: %w", err)
	}
	return nil
}

// WriteJSON prints the report as one JSON object.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("probe: writing the report as JSON: %w", err)
	}
	return nil
}
