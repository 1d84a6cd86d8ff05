package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

// A request whose key or due date one of the task services would refuse
// for good is refused at the gate, at the envelope check with the member's
// path, so that it ends rejected and no service is called; the largest key
// and the earliest date every service takes pass.
func TestTheGateRefusesKeysAndDueDatesThatATaskServiceWouldRefuse(t *testing.T) {
	s := seed(t)
	withRequest := func(edit func(m map[string]any)) []byte { return scenario.Edit(s.Original.Request, edit) }
	withDue := func(due string) []byte {
		return withRequest(func(m map[string]any) { m["task"].(map[string]any)["due_at"] = due })
	}
	withKey := func(scope, intent string) []byte {
		return withRequest(func(m map[string]any) {
			m["intent_id"] = intent
			if scope != "" {
				m["scope"] = scope
			}
		})
	}
	const intentPath, duePath = "$.request.intent_id", "$.request.task.due_at"
	for _, c := range []struct {
		name, path string
		request    []byte
	}{
		{"a due date in year 0 is refused", duePath, withDue("0000-01-01")},
		{"a due time before 1970 is refused", duePath, withDue("1969-12-31T23:59:59Z")},
		{"a due time on the last day of 1969 in its own offset is refused", duePath, withDue("1969-12-31T23:30:00-01:00")},
		{"a 250-byte intent id is refused", intentPath, withKey("", strings.Repeat("i", 250))},
		{"an intent id one byte past the name's bound is refused", intentPath, withKey("", strings.Repeat("i", document.MaxKeyNameBytes-len(".ics")+1))},
		{"an intent id that fits alone but not with its scope is refused", intentPath, withKey("team-a", strings.Repeat("i", document.MaxKeyNameBytes-len(".ics")))},
		{"an intent id of 27 CJK characters, each byte written as three, is refused", intentPath, withKey("", strings.Repeat("日", 27))},
		{"the earliest due date passes", "", withDue(document.EarliestDueDate)},
		{"the last day of year 9999 passes", "", withDue("9999-12-31T23:59:59-01:00")},
		{"the longest intent id passes", "", withKey("", strings.Repeat("i", document.MaxKeyNameBytes-len(".ics")))},
		{"the longest intent id of a scope passes", "", withKey("team-a", strings.Repeat("i", document.MaxKeyNameBytes-len(".ics")-len("team-a~~")))},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gate.CheckDocumentBindings(s.Original.Candidate, c.request, s.Original.Approval)
			var ge *gate.Error
			switch {
			case c.path == "" && errors.As(err, &ge) && ge.Check == gate.CheckEnvelope:
				t.Fatalf("refused at the envelope check: %v", err)
			case c.path == "":
				// It passes the decoder; the stale approval's binding may
				// still refuse it, which is not this test's concern.
			case !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || ge.Path != c.path:
				t.Fatalf("want a refusal at %s %s, got %v", gate.CheckEnvelope, c.path, err)
			case !errors.Is(err, gate.ErrEnvelope):
				t.Errorf("the refusal %v does not match gate.ErrEnvelope", err)
			}
		})
	}
}
