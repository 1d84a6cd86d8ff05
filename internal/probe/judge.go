package probe

import (
	"fmt"
	"strings"
)

// Judge sums rows up into a verdict.
func Judge(rows []Row) Verdict {
	v := Verdict{Unsafe: []string{}, Unknown: []string{}, Caveats: []string{}, Fixes: []string{}}
	var unsafe, unknown []string
	for _, r := range rows {
		switch r.Status {
		case Unsafe:
			v.Unsafe = append(v.Unsafe, r.ID)
			unsafe = append(unsafe, fmt.Sprintf("%s (%s)", r.Consequence, r.Question))
			v.Fixes = append(v.Fixes, r.Question+": "+r.Fix)
		case Caveat:
			v.Caveats = append(v.Caveats, r.Consequence)
			v.Fixes = append(v.Fixes, r.Question+": "+r.Fix)
		case Unknown:
			v.Unknown = append(v.Unknown, r.ID)
			unknown = append(unknown, r.Question)
		}
	}
	switch {
	case len(unsafe) > 0:
		v.Headline = "unsafe for at-least-once delivery"
		v.Summary = v.Headline + ": " + strings.Join(unsafe, "; ")
	case len(unknown) > 0:
		v.Headline = "not proven safe for at-least-once delivery"
		v.Summary = v.Headline + ": not measured: " + strings.Join(unknown, "; ")
	default:
		v.Safe = true
		v.Headline = "safe for at-least-once delivery"
		v.Summary = v.Headline
		if len(v.Caveats) > 0 {
			v.Summary += ", with a caveat: " + strings.Join(v.Caveats, "; ")
		}
	}
	return v
}
