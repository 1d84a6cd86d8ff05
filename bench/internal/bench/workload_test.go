package bench

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

var generatedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// outcomes plays the task service on a workload in sending order: an
// intent's first request creates, the same bytes again replay, a changed
// request under a known intent is a conflict.
func outcomes(t *testing.T, w *Workload) map[string]int {
	t.Helper()
	first := map[string]string{}
	out := map[string]int{}
	for _, env := range w.Envelopes {
		id := document.Identify(env)
		if id.IntentID == "" {
			t.Fatalf("an envelope without an intent id: %.80s", env)
		}
		f, seen := first[id.IntentID]
		switch {
		case !seen:
			first[id.IntentID] = string(env)
			out[document.OutcomeCreated]++
		case f == string(env):
			out[document.OutcomeReplayed]++
		default:
			out[document.OutcomeConflict]++
		}
	}
	return out
}

// The shares asked for become counts of resends and changed requests, and
// a service that dedups by intent id creates exactly the distinct intents;
// the rest replay or conflict.
func TestGenerateMixesResendsAndConflictsInTheSharesAskedFor(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		n                                  int
		resend, conflict                   float64
		distinct, resends, conflicts       int
		replayedExactly, conflictedExactly bool
	}{
		{"no resends and no conflicts: every approval creates", 50, 0, 0, 50, 0, 0, true, true},
		{"resends only: each one replays", 100, 0.2, 0, 80, 20, 0, true, true},
		{"changed requests only: each one is a conflict", 100, 0, 0.1, 90, 0, 10, true, true},
		{"the bench's default mix", 200, 0.10, 0.05, 170, 20, 10, false, false},
		{"shares round to the nearest approval", 15, 0.10, 0.05, 12, 2, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := generate(workloadSpec{N: tc.n, Resend: tc.resend, Conflict: tc.conflict, Prefix: "t", Now: generatedAt, ApprovalTimeout: time.Hour, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Envelopes) != tc.n || len(w.Subjects) != tc.n {
				t.Fatalf("%d envelopes and %d subjects; want %d", len(w.Envelopes), len(w.Subjects), tc.n)
			}
			if w.Distinct != tc.distinct || w.Resends != tc.resends || w.Conflicts != tc.conflicts {
				t.Errorf("distinct %d, resends %d, conflicts %d; want %d, %d, %d", w.Distinct, w.Resends, w.Conflicts, tc.distinct, tc.resends, tc.conflicts)
			}
			got := outcomes(t, w)
			if got[document.OutcomeCreated] != w.Distinct {
				t.Errorf("created %d; want the distinct intents, %d", got[document.OutcomeCreated], w.Distinct)
			}
			if r, c := got[document.OutcomeReplayed], got[document.OutcomeConflict]; r+c != w.Resends+w.Conflicts {
				t.Errorf("replayed %d + conflicts %d; want resends + changed requests, %d", r, c, w.Resends+w.Conflicts)
			}
			if tc.replayedExactly && got[document.OutcomeReplayed] != w.Resends {
				t.Errorf("replayed %d; want %d", got[document.OutcomeReplayed], w.Resends)
			}
			if tc.conflictedExactly && got[document.OutcomeConflict] != w.Conflicts {
				t.Errorf("conflicts %d; want %d", got[document.OutcomeConflict], w.Conflicts)
			}
			for i, subj := range w.Subjects {
				if !strings.HasSuffix(subj, document.Identify(w.Envelopes[i]).IntentID) {
					t.Fatalf("envelope %d is sent on %s, not on its intent's subject", i, subj)
				}
			}
		})
	}
}

// The same seed gives the same workload, byte for byte and in the same
// order; another seed shuffles it differently.
func TestGenerateIsDeterministicForASeed(t *testing.T) {
	spec := workloadSpec{N: 60, Resend: 0.1, Conflict: 0.05, Prefix: "d", Key: scenario.TestKey(), Now: generatedAt, ApprovalTimeout: time.Hour, Seed: 42}
	a, err := generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(a.Envelopes, b.Envelopes, bytes.Equal) || !slices.Equal(a.Subjects, b.Subjects) {
		t.Error("two workloads of one seed differ")
	}
	spec.Seed = 43
	c, err := generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Subjects, c.Subjects) {
		t.Error("another seed sends in the same order")
	}
}

// A padded workload's envelopes come near the size asked for.
func TestGeneratePadsEnvelopesToThePayloadAskedFor(t *testing.T) {
	w, err := generate(workloadSpec{N: 3, Payload: 8000, Prefix: "p", Now: generatedAt, ApprovalTimeout: time.Hour, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if w.EnvelopeBytes < 7000 || w.EnvelopeBytes > 9000 {
		t.Errorf("envelope of %d bytes; want about 8000", w.EnvelopeBytes)
	}
}

func TestGenerateRefusesSharesThatLeaveNoDistinctIntent(t *testing.T) {
	for _, spec := range []workloadSpec{
		{N: 10, Resend: 0.6, Conflict: 0.4},
		{N: 10, Resend: -0.1},
		{N: 1, Resend: 0.5, Conflict: 0.4},
	} {
		spec.Prefix, spec.Now = "r", generatedAt
		if _, err := generate(spec); err == nil {
			t.Errorf("resend %.2f, conflict %.2f of %d approvals: generated", spec.Resend, spec.Conflict, spec.N)
		}
	}
}
