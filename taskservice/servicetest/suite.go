package servicetest

import (
	"testing"
)

// Class is what a kind of service can promise about its keys.
type Class int

// Classes of service.
const (
	// KeepsKeys: the service keeps every key it answered, also after its
	// task was deleted (a tombstone): a resend after a deletion replays.
	KeepsKeys Class = iota + 1
	// CreateIfAbsent: the service creates a name only if it is absent (a
	// CalDAV PUT with If-None-Match: *); the key goes with its task, so a
	// resend after a deletion may create the task again (a caveat).
	CreateIfAbsent
	// NoKey: the service has no key; the adapter looks the key up and holds
	// a per-key lock before it creates. It must offer the lookup
	// (Target.Find), and a deleted task may come back on a resend.
	NoKey
)

// Features says what the service under test promises, and tunes the rows.
type Features struct {
	Class   Class
	Options Options
}

// Run runs every row against the target newTarget returns, each as a
// subtest of t named by its row id, in one run with intent ids of its own.
// A row fails its subtest when it is unsafe, when it is a caveat the
// class does not allow, or when a hook the target offers did not let it be
// measured; a row whose hook the target lacks is skipped, saying so.
func Run(t *testing.T, newTarget func(t *testing.T) Target, f Features) {
	t.Helper()
	target := newTarget(t)
	rows, err := NewRows(target, f.Options)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range allRows {
		t.Run(id, func(t *testing.T) {
			row := rows.Measure(t.Context(), id)
			judge(t, f, target, row)
		})
	}
}

// judge fails, skips or passes a row's subtest.
func judge(t *testing.T, f Features, target Target, row Row) {
	t.Helper()
	what := row.Question + ": " + row.Answer + " (seen: " + row.Seen + ")"
	switch row.Status {
	case Safe, Info:
		t.Log(what)
	case Unsafe:
		t.Errorf("%s\n  consequence: %s\n  fix: %s", what, row.Consequence, row.Fix)
	case Caveat:
		if row.ID == RowAfterDelete && f.Class != KeepsKeys {
			t.Log(what + "; allowed for this class: " + row.Consequence)
			return
		}
		t.Errorf("%s\n  consequence: %s\n  fix: %s", what, row.Consequence, row.Fix)
	case NotApplicable:
		if row.ID == RowReadAfterWrite && f.Class == NoKey {
			t.Errorf("%s: a service with no key is decided by a lookup: the target must offer it (Target.Find)", what)
			return
		}
		t.Skip(what)
	case Unknown:
		if lacks(target, row.ID) {
			t.Skip(what)
		}
		t.Errorf("not measured: %s", what)
	}
}

// lacks reports whether target lacks the hook row id needs.
func lacks(target Target, id string) bool {
	switch id {
	case RowLostReply:
		return target.LoseReply == nil
	case RowAfterDelete:
		return target.Delete == nil
	case RowRestart:
		return target.Restart == nil
	case RowScope:
		return target.Scope == ""
	}
	return false
}
