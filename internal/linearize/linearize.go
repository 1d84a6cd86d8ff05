package linearize

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sendtwice/sendtwice/internal/history"
	"github.com/sendtwice/sendtwice/taskservice"
)

// Options tune Check.
type Options struct {
	// Visualization is the path of the HTML file written when the history
	// is not linearizable: porcupine's visualisation of the calls of the
	// intents named. Empty: none is written.
	Visualization string
	// Timeout bounds the search; 0 means none. A history the checker could
	// not decide in time is reported as such, never as linearizable.
	Timeout time.Duration
}

// Result is the verdict on a history.
type Result struct {
	// OK reports that the history is linearizable and no task id answers
	// for two intents.
	OK bool
	// TimedOut reports that the checker gave up at Options.Timeout.
	TimedOut bool
	// Operations counts the calls checked; WithoutResponse those whose
	// response is not known (failed, or never returned); Intents the
	// distinct intent ids.
	Operations      int
	WithoutResponse int
	Intents         int
	// Took is how long the check took.
	Took time.Duration
	// Violations name the intents whose calls no order explains, and the
	// task ids answered for more than one intent.
	Violations []Violation
	// Visualization is the HTML file written, if any.
	Visualization string
}

// Violation is one thing the history cannot explain.
type Violation struct {
	// Intents are the intent ids involved: one for a history no order
	// explains, two or more for a shared task id.
	Intents []string
	// TaskID is the shared task id, for that kind of violation.
	TaskID string
	// Reason says what is wrong, in a sentence.
	Reason string
}

func (v Violation) String() string { return v.Reason }

// String is the one-line verdict: "linearizable: N operations, M without
// response, K intents, checked in T", or what is not.
func (r Result) String() string {
	counts := fmt.Sprintf("%d operations, %d without response, %d intents, checked in %s",
		r.Operations, r.WithoutResponse, r.Intents, roundDuration(r.Took))
	switch {
	case r.OK:
		return "linearizable: " + counts
	case r.TimedOut && len(r.Violations) == 0:
		return "not decided (the checker timed out): " + counts
	}
	var reasons []string
	for _, v := range r.Violations {
		reasons = append(reasons, v.Reason)
	}
	return "not linearizable: " + counts + "; " + strings.Join(reasons, "; ")
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

// Infinity is the return time given to a call without a known response.
const infinity = math.MaxInt64

// Check decides whether calls are linearizable under the task service
// model, and whether every task id answers for one intent only. It returns
// an error only when the calls cannot be checked (a call without an intent
// id) or the visualisation cannot be written.
func Check(calls []history.Call, opts Options) (Result, error) {
	start := time.Now()
	ops := make([]porcupine.Operation, 0, len(calls))
	intents := map[string]bool{}
	var res Result
	for _, c := range calls {
		if c.IntentID == "" {
			return Result{}, fmt.Errorf("linearize: call %s (%s) has no intent id", c.ID, c.File)
		}
		op := operation(c)
		if !op.Output.(output).Known {
			res.WithoutResponse++
		}
		intents[c.IntentID] = true
		ops = append(ops, op)
	}
	res.Operations, res.Intents = len(ops), len(intents)

	checked := withoutRedundantCalls(ops)
	m := Model()
	verdict := porcupine.CheckOperationsTimeout(m, checked, opts.Timeout)
	res.TimedOut = verdict == porcupine.Unknown
	var bad []string
	if verdict == porcupine.Illegal {
		// Find the intents that fail: each partition on its own.
		for _, part := range m.Partition(checked) {
			if porcupine.CheckOperationsTimeout(m, part, opts.Timeout) == porcupine.Illegal {
				bad = append(bad, part[0].Input.(input).IntentID)
			}
		}
		sort.Strings(bad)
		for _, id := range bad {
			res.Violations = append(res.Violations, Violation{Intents: []string{id},
				Reason: fmt.Sprintf("intent %q: no order of its %d calls explains the responses (%s)", id, countIntent(ops, id), responses(ops, id))})
		}
		if len(bad) == 0 {
			// Porcupine found the whole illegal but no partition alone:
			// that would be a fault in the partitioning, never a pass.
			res.Violations = append(res.Violations, Violation{Reason: "the history is not linearizable, but no single intent is to blame"})
		}
	}
	shared := sharedTaskIDs(ops)
	res.Violations = append(res.Violations, shared...)
	res.OK = verdict == porcupine.Ok && len(res.Violations) == 0
	res.Took = time.Since(start)

	if len(res.Violations) > 0 && opts.Visualization != "" {
		if err := visualize(opts.Visualization, checked, res.Violations); err != nil {
			return res, err
		}
		res.Visualization = opts.Visualization
	}
	return res, nil
}

// withoutRedundantCalls drops, of the calls without response that one
// intent got with one digest, all but the first sent. The verdict is the
// same: such a call can only bind an absent intent to its digest, at any
// time after it was sent, and the first one can do that at any of those
// times too; with the rest placed after every other call, any order of the
// whole history gives one of the reduced history, and back. The search,
// exponential in the number of such calls when it has to try them all (as
// on a violation), stays small.
func withoutRedundantCalls(ops []porcupine.Operation) []porcupine.Operation {
	type key struct{ intent, digest string }
	first := map[key]int{}
	for i, op := range ops {
		if op.Output.(output).Known || op.Input.(input).Delete {
			continue
		}
		in := op.Input.(input)
		k := key{in.IntentID, in.RequestDigest}
		if j, seen := first[k]; !seen || op.Call < ops[j].Call {
			first[k] = i
		}
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for i, op := range ops {
		in := op.Input.(input)
		if op.Output.(output).Known || in.Delete || first[key{in.IntentID, in.RequestDigest}] == i {
			out = append(out, op)
		}
	}
	return out
}

func countIntent(ops []porcupine.Operation, id string) int {
	n := 0
	for _, op := range ops {
		if op.Input.(input).IntentID == id {
			n++
		}
	}
	return n
}

// responses lists, in the order the calls were sent, what the calls of
// intent id got back: at most maxListed of them.
func responses(ops []porcupine.Operation, id string) string {
	const maxListed = 8
	var sub []porcupine.Operation
	for _, op := range ops {
		if op.Input.(input).IntentID == id {
			sub = append(sub, op)
		}
	}
	sort.SliceStable(sub, func(i, j int) bool { return sub[i].Call < sub[j].Call })
	var out []string
	for _, op := range sub {
		if len(out) == maxListed {
			out = append(out, fmt.Sprintf("and %d more", len(sub)-maxListed))
			break
		}
		o := op.Output.(output)
		if op.Input.(input).Delete {
			if o.Known {
				out = append(out, "delete "+o.Outcome)
			} else {
				out = append(out, "delete without response")
			}
			continue
		}
		if o.Known && o.TaskDeleted {
			out = append(out, o.Outcome+" "+o.TaskID+" (task deleted)")
		} else if o.Known {
			out = append(out, o.Outcome+" "+o.TaskID)
		} else {
			out = append(out, "no response")
		}
	}
	return strings.Join(out, ", ")
}

// sharedTaskIDs finds task ids answered for more than one intent.
func sharedTaskIDs(ops []porcupine.Operation) []Violation {
	owners := map[string][]string{}
	for _, op := range ops {
		out := op.Output.(output)
		if !out.Known || out.TaskID == "" {
			continue
		}
		id := op.Input.(input).IntentID
		if !slices.Contains(owners[out.TaskID], id) {
			owners[out.TaskID] = append(owners[out.TaskID], id)
		}
	}
	var vs []Violation
	for task, ids := range owners {
		if len(ids) < 2 {
			continue
		}
		sort.Strings(ids)
		quoted := make([]string, len(ids))
		for i, id := range ids {
			quoted[i] = fmt.Sprintf("%q", id)
		}
		vs = append(vs, Violation{Intents: ids, TaskID: task,
			Reason: fmt.Sprintf("task %q answers for %d intents: %s", task, len(ids), strings.Join(quoted, ", "))})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].TaskID < vs[j].TaskID })
	return vs
}

// visualize writes porcupine's visualisation of the calls of the intents
// the violations name.
func visualize(path string, ops []porcupine.Operation, vs []Violation) error {
	named := map[string]bool{}
	for _, v := range vs {
		for _, id := range v.Intents {
			named[id] = true
		}
	}
	var sub []porcupine.Operation
	for _, op := range ops {
		if named[op.Input.(input).IntentID] {
			sub = append(sub, op)
		}
	}
	if len(sub) == 0 {
		sub = ops
	}
	assignLanes(sub)
	m := Model()
	_, info := porcupine.CheckOperationsVerbose(m, sub, 0)
	var notes []porcupine.Annotation
	for _, v := range vs {
		if v.TaskID == "" {
			continue
		}
		for _, op := range sub {
			if out := op.Output.(output); out.Known && out.TaskID == v.TaskID {
				notes = append(notes, porcupine.Annotation{Tag: "shared task id", Start: op.Call, End: op.Return,
					Description: v.TaskID, Details: v.Reason, BackgroundColor: "#f4b4b4"})
			}
		}
	}
	info.AddAnnotations(notes)
	if err := porcupine.VisualizePath(m, info, path); err != nil {
		return fmt.Errorf("linearize: writing the visualisation: %w", err)
	}
	return nil
}

// assignLanes gives the calls of each intent client ids (lanes of the
// visualisation) such that calls in one lane never overlap.
func assignLanes(ops []porcupine.Operation) {
	ends := map[string][]int64{} // intent → end of the last call in each lane
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ops[idx[a]].Call < ops[idx[b]].Call })
	for _, i := range idx {
		id := ops[i].Input.(input).IntentID
		lanes := ends[id]
		lane := -1
		for l, end := range lanes {
			if end < ops[i].Call {
				lane = l
				break
			}
		}
		if lane < 0 {
			lane = len(lanes)
			lanes = append(lanes, 0)
		}
		lanes[lane] = ops[i].Return
		ends[id] = lanes
		ops[i].ClientId = lane
	}
}

// input is what a call asks.
type input struct {
	// Delete marks a delete of the intent's task by its owner.
	Delete        bool
	IntentID      string
	RequestDigest string
	CallRef       string
}

// output is what came back. Known is false for a call whose response is
// not known; Err then holds its error, if it returned one.
type output struct {
	Known       bool
	Outcome     string
	TaskID      string
	TaskDeleted bool
	Err         string
}

// state is one intent's record at the service. TaskID is empty while the
// intent is bound by a call whose response is not known and no later
// response has named the task yet.
type state struct {
	Bound   bool
	Digest  string
	TaskID  string
	Unnamed bool
	// Deleted: the bound task was deleted by its owner; the key stays.
	Deleted bool
}

func operation(c history.Call) porcupine.Operation {
	op := porcupine.Operation{
		Input:    input{Delete: c.Op == history.OpDelete, IntentID: c.IntentID, RequestDigest: c.RequestDigest, CallRef: c.CallRef},
		Call:     c.Sent.UnixNano(),
		Return:   infinity,
		Output:   output{Err: c.Err},
		Metadata: c.ID + " " + c.File,
	}
	if c.Answered {
		op.Output = output{Known: true, Outcome: c.Outcome, TaskID: c.TaskID, TaskDeleted: c.TaskDeleted}
		op.Return = c.Returned.UnixNano()
		if op.Return < op.Call {
			// A wall clock set back between the call and its return: widen
			// the interval rather than invert it.
			op.Return = op.Call
		}
	}
	return op
}

var seed = maphash.MakeSeed()

// Model is the task service's model for porcupine, partitioned by intent
// id. Its inputs, outputs and states are this package's own types; Check
// builds them from recorded calls.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: partition,
		Init:      func() any { return state{} },
		Step:      step,
		Hash: func(s any) uint64 {
			st := s.(state)
			var h maphash.Hash
			h.SetSeed(seed)
			if st.Bound {
				h.WriteByte(1)
			}
			h.WriteString(st.Digest)
			h.WriteByte(0)
			h.WriteString(st.TaskID)
			if st.Deleted {
				h.WriteByte(2)
			}
			return h.Sum64()
		},
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
}

func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range ops {
		id := op.Input.(input).IntentID
		k, ok := index[id]
		if !ok {
			k = len(parts)
			index[id] = k
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], op)
	}
	return parts
}

// step applies one call to one intent's state, if the call's output is
// possible there.
func step(s, in, out any) (bool, any) {
	st, i, o := s.(state), in.(input), out.(output)
	if i.Delete {
		return stepDelete(st, o)
	}
	if !o.Known {
		// Taking effect now: an absent intent is bound to this digest,
		// with a task nobody has named yet; a bound one does not change.
		// (Not taking effect is placing it after every other call.)
		if !st.Bound {
			return true, state{Bound: true, Digest: i.RequestDigest, Unnamed: true}
		}
		return true, st
	}
	if o.TaskID == "" {
		return false, st
	}
	switch taskservice.Outcome(o.Outcome) {
	case taskservice.Created:
		if st.Bound {
			return false, st
		}
		return true, state{Bound: true, Digest: i.RequestDigest, TaskID: o.TaskID}
	case taskservice.Replayed, taskservice.Conflict:
		if !st.Bound || (st.Digest == i.RequestDigest) != (o.Outcome == string(taskservice.Replayed)) {
			return false, st
		}
		if o.Outcome == string(taskservice.Replayed) && o.TaskDeleted != st.Deleted {
			// A replay says whether the task was deleted, and only then.
			return false, st
		}
		if st.Unnamed {
			// The first response to name the task names it for good.
			return true, state{Bound: true, Digest: st.Digest, TaskID: o.TaskID}
		}
		return st.TaskID == o.TaskID, st
	}
	return false, st
}

// stepDelete applies the owner's delete of the intent's task. A delete
// that succeeded needs a task that exists (bound and not deleted); one
// without a known response may have deleted it, or not (placed after every
// other call). The key stays bound: a later create is replayed (marked
// deleted) or a conflict, never created again.
func stepDelete(st state, o output) (bool, any) {
	if !o.Known {
		if st.Bound && !st.Deleted {
			st.Deleted = true
		}
		return true, st
	}
	if o.Outcome != history.Deleted || !st.Bound || st.Deleted {
		return false, st
	}
	st.Deleted = true
	return true, st
}

func describeOperation(in, out any) string {
	i, o := in.(input), out.(output)
	if i.Delete {
		switch {
		case o.Known:
			return fmt.Sprintf("delete(%s) → %s", i.IntentID, o.Outcome)
		case o.Err != "":
			return fmt.Sprintf("delete(%s) → error, effect unknown: %s", i.IntentID, o.Err)
		default:
			return fmt.Sprintf("delete(%s) → no response (effect unknown)", i.IntentID)
		}
	}
	call := fmt.Sprintf("create(%s, %s)", i.IntentID, shortDigest(i.RequestDigest))
	switch {
	case o.Known && o.TaskDeleted:
		return fmt.Sprintf("%s → %s %s (task deleted)", call, o.Outcome, o.TaskID)
	case o.Known:
		return fmt.Sprintf("%s → %s %s", call, o.Outcome, o.TaskID)
	case o.Err != "":
		return fmt.Sprintf("%s → error, effect unknown: %s", call, o.Err)
	default:
		return call + " → no response (effect unknown)"
	}
}

func describeState(s any) string {
	st := s.(state)
	switch {
	case !st.Bound:
		return "absent"
	case st.Unnamed:
		return fmt.Sprintf("bound to %s, task not named yet", shortDigest(st.Digest))
	case st.Deleted:
		return fmt.Sprintf("bound to %s, task %s deleted", shortDigest(st.Digest), st.TaskID)
	default:
		return fmt.Sprintf("bound to %s, task %s", shortDigest(st.Digest), st.TaskID)
	}
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12] + "…"
	}
	return d
}

// ErrNoFiles is returned by CheckFiles when given no file.
var ErrNoFiles = errors.New("linearize: no history files")

// CheckFiles reads the history files at paths, merges them and checks
// them.
func CheckFiles(opts Options, paths ...string) (Result, error) {
	if len(paths) == 0 {
		return Result{}, ErrNoFiles
	}
	h, err := history.Read(paths...)
	if err != nil {
		return Result{}, fmt.Errorf("linearize: %w", err)
	}
	return Check(h.Calls, opts)
}
