package gate_test

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

func seed(t testing.TB) *scenario.Seed {
	t.Helper()
	s, err := scenario.Build()
	if err != nil {
		t.Fatalf("building the seed scenario: %v", err)
	}
	return s
}

func TestSeedApprovalsPass(t *testing.T) {
	s := seed(t)
	for name, a := range map[string]scenario.Approved{"original": s.Original, "changed": s.Changed, "new intent": s.NewIntent} {
		t.Run("the "+name+" request passes with its own approval", func(t *testing.T) {
			v, err := gate.CheckBindings(a.Envelope())
			if err != nil {
				t.Fatalf("gate refused: %v", err)
			}
			if v.RequestDigest != mustApproval(t, a.Approval).Request.Digest {
				t.Errorf("verdict digest %s differs from the approval's", v.RequestDigest)
			}
			if _, err := gate.CheckDocumentBindings(a.Candidate, a.Request, a.Approval); err != nil {
				t.Fatalf("gate refused the separate documents: %v", err)
			}
		})
	}
}

func mustApproval(t testing.TB, b []byte) *document.Approval {
	t.Helper()
	v, err := document.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	a, err := document.DecodeApproval("$", v)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// shuffled writes v with every object's members in reverse order and extra
// white space, at every depth.
func shuffled(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("\n  %q :\t%s", k, shuffled(x[k])))
		}
		return "{" + strings.Join(parts, " ,") + " }"
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, shuffled(e))
		}
		return "[ " + strings.Join(parts, " , ") + " ]"
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	default:
		return fmt.Sprint(x)
	}
}

func TestShuffledRequestKeepsItsDigestAndPasses(t *testing.T) {
	s := seed(t)
	o := s.Original
	for name, doc := range map[string]*[]byte{"request": &o.Request, "candidate": &o.Candidate} {
		t.Run("a "+name+" with its members shuffled at every depth still passes", func(t *testing.T) {
			v, err := document.Parse(*doc)
			if err != nil {
				t.Fatal(err)
			}
			shuf := []byte(shuffled(v))
			if bytes.Equal(shuf, *doc) {
				t.Fatal("shuffling changed nothing; the test would prove nothing")
			}
			a := o
			if name == "request" {
				a.Request = shuf
			} else {
				a.Candidate = shuf
			}
			if _, err := gate.CheckDocumentBindings(a.Candidate, a.Request, a.Approval); err != nil {
				t.Fatalf("gate refused the shuffled %s: %v", name, err)
			}
			if _, err := gate.CheckBindings(a.Envelope()); err != nil {
				t.Fatalf("gate refused the shuffled %s in an envelope: %v", name, err)
			}
		})
	}
}

func TestTamperedMessagesStopAtTheirCheck(t *testing.T) {
	s := seed(t)
	cases := s.TamperedCases()
	if len(cases) < 6 {
		t.Fatalf("want at least six tampered cases, have %d", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name+" stops at "+c.Check, func(t *testing.T) {
			v, err := gate.CheckBindings(c.Envelope)
			if err == nil {
				t.Fatalf("gate passed a tampered message: %+v", v)
			}
			var ge *gate.Error
			if !errors.As(err, &ge) {
				t.Fatalf("error is %T, want *gate.Error: %v", err, err)
			}
			if ge.Check != c.Check {
				t.Fatalf("stopped at %q (%v), want %q", ge.Check, err, c.Check)
			}
			if ge.Path == "" || ge.Reason == "" {
				t.Errorf("refusal lacks a path or a reason: %+v", ge)
			}
		})
	}
}

func TestGateChecksInOrder(t *testing.T) {
	s := seed(t)
	o := s.Original
	// A message with every fault at once must stop at the first check in order.
	bad := strings.Replace(string(o.Envelope()), `"create_fake_task"`, `"publish"`, 1)
	bad = strings.ReplaceAll(bad, `"v3"`, `"v4"`)
	_, err := gate.CheckBindings([]byte(bad))
	var ge *gate.Error
	if !errors.As(err, &ge) || ge.Check != gate.CheckCandidateBinding {
		t.Fatalf("want candidate_binding first, got %v", err)
	}
}

// badEnvelopes is the bad-input table: each is refused at the envelope check.
func badEnvelopes(t testing.TB) []struct {
	name, path string
	input      []byte
} {
	s := seed(t)
	good := string(s.Original.Envelope())
	rep := func(old, new string) []byte {
		if !strings.Contains(good, old) {
			t.Fatalf("seed envelope lacks %q", old)
		}
		return []byte(strings.Replace(good, old, new, 1))
	}
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	noRequest, err := document.BuildEnvelope(s.Original.Candidate, nil, s.Original.Approval)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name, path string
		input      []byte
	}{
		{"a duplicate member", "$", rep(`{"schema_version":"task-envelope.v1",`, `{"schema_version":"task-envelope.v1","schema_version":"task-envelope.v1",`)},
		{"a case-variant member name", "$.request.task.Title", rep(`"title":`, `"Title":`)},
		{"an unknown member", "$.request.priority", rep(`"request":{`, `"request":{"priority":"high",`)},
		{"a wrong type", "$.request.intent_id", rep(`"intent_id":"intent-0001"`, `"intent_id":1`)},
		{"a title with a line break (the task service takes one line)", "$.request.task.title", rep(`"title":"`+scenario.Title+`"`, `"title":"line one\nline two"`)},
		{"trailing data", "$", append([]byte(good), []byte(` {}`)...)},
		{"invalid UTF-8", "$", rep(`"v3"`, "\"v\xff3\"")},
		{"an oversized document", "$", rep(`"kind":"commitment"`, `"kind":"`+strings.Repeat("x", 300<<10)+`"`)},
		{"a deeply nested document", "$", rep(`"speaker_ref":null`, `"speaker_ref":`+deep)},
		{"empty input", "$", nil},
		{"a missing request", "$.request", noRequest},
		{"a null where a string is required", "$.request.task.title", rep(`"title":"`+scenario.Title+`"`, `"title":null`)},
		{"a string where null or a person is expected", "$.request.task.assignee_person_ref", rep(`"assignee_person_ref":null`, `"assignee_person_ref":""`)},
		{"a missing speaker_ref (null is not the same as missing)", "$.candidate.speaker_ref", rep(`"speaker_ref":null,`, ``)},
		{"a wrong envelope version", "$.schema_version", rep(`"task-envelope.v1"`, `"task-envelope.v2"`)},
	}
}

func TestBadInputIsRefusedAtTheEnvelopeCheck(t *testing.T) {
	for _, c := range badEnvelopes(t) {
		t.Run(c.name+" is refused naming its path", func(t *testing.T) {
			_, err := gate.CheckBindings(c.input)
			var ge *gate.Error
			if !errors.As(err, &ge) {
				t.Fatalf("want a *gate.Error, got %v", err)
			}
			if ge.Check != gate.CheckEnvelope {
				t.Fatalf("stopped at %q, want envelope: %v", ge.Check, err)
			}
			if !strings.HasPrefix(ge.Path, c.path) {
				t.Errorf("path %q, want it to start with %q (%v)", ge.Path, c.path, err)
			}
			if !errors.Is(err, gate.ErrEnvelope) {
				t.Errorf("errors.Is(err, ErrEnvelope) is false for %v", err)
			}
		})
	}
}

func FuzzGate(f *testing.F) {
	s := seed(f)
	f.Add(s.Original.Envelope())
	f.Add(s.Changed.Envelope())
	for _, c := range s.TamperedCases() {
		f.Add(c.Envelope)
	}
	for _, c := range badEnvelopes(f) {
		if len(c.input) < 64<<10 {
			f.Add(c.input)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := gate.CheckBindings(data)
		if err != nil {
			var ge *gate.Error
			if !errors.As(err, &ge) || ge.Check == "" || ge.Reason == "" {
				t.Fatalf("refusal is not a complete *gate.Error: %#v", err)
			}
			return
		}
		// Whatever passed must pass the strict decoder on its own.
		parts, err := document.SplitEnvelope(data)
		if err != nil {
			t.Fatalf("gate passed what the strict decoder refuses: %v", err)
		}
		if _, err := document.DecodeCandidate("$.candidate", parts.Candidate); err != nil {
			t.Fatalf("gate passed a candidate the decoder refuses: %v", err)
		}
		if _, err := document.DecodeRequest("$.request", parts.Request); err != nil {
			t.Fatalf("gate passed a request the decoder refuses: %v", err)
		}
		if _, err := document.DecodeApproval("$.approval", parts.Approval); err != nil {
			t.Fatalf("gate passed an approval the decoder refuses: %v", err)
		}
		if len(v.Approval.Capabilities) != 1 || v.Approval.Capabilities[0] != document.CapabilityCreateFakeTask {
			t.Fatalf("gate passed capabilities %q", v.Approval.Capabilities)
		}
		// The request bytes the executor sends are the request's canonical
		// form, and hash to the approved digest.
		if d, err := canon.Digest(v.RequestJSON); err != nil || d != v.RequestDigest || d != v.Approval.Request.Digest {
			t.Fatalf("the verdict's request JSON digests to %s (%v), not to %s", d, err, v.RequestDigest)
		}
		if c, err := canon.Canonicalize(v.RequestJSON); err != nil || !bytes.Equal(c, v.RequestJSON) {
			t.Fatalf("the verdict's request JSON is not canonical: %s (%v)", v.RequestJSON, err)
		}
	})
}

// "café" spelled with U+00E9 (NFC) and with e + U+0301 (NFD) would be two
// intent ids, so two tasks. The NFD request, approved as written, is
// refused at envelope naming request.intent_id; the NFC one passes.
func TestAnIntentIDNotInNFCIsRefusedAtTheEnvelopeCheck(t *testing.T) {
	for _, c := range []struct {
		name, intent string
		refused      bool
	}{
		{"an intent id in NFC passes", "caf\u00e9", false},
		{"the NFD spelling of the same intent id is refused", "cafe\u0301", true},
		{"combining marks out of canonical order are refused", "a\u0301\u0323", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := scenario.ApproveAsWritten(scenario.Candidate(), "task-request-cafe", c.intent, "補上通知設定的檢查項目", "approval-cafe")
			if err != nil {
				t.Fatal(err)
			}
			_, err = gate.CheckBindings(a.Envelope())
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *gate.Error
			if !errors.As(err, &ge) || ge.Check != gate.CheckEnvelope || ge.Path != "$.request.intent_id" ||
				!strings.Contains(ge.Reason, "NFC") {
				t.Fatalf("refusal %v, want envelope at $.request.intent_id saying NFC", err)
			}
			if !errors.Is(err, gate.ErrEnvelope) || !errors.Is(err, document.ErrValue) {
				t.Errorf("the refusal unwraps to neither ErrEnvelope nor ErrValue: %v", err)
			}
		})
	}
}

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
		{"an intent id one byte past the name's bound is refused", intentPath, withKey("", strings.Repeat("i", document.MaxKeyNameBytes-document.KeyTagBytes-len(".ics")+1))},
		{"an intent id that fits alone but not with its scope is refused", intentPath, withKey("team-a", strings.Repeat("i", document.MaxKeyNameBytes-document.KeyTagBytes-len(".ics")))},
		{"an intent id of 23 CJK characters, each byte written as three, is refused", intentPath, withKey("", strings.Repeat("日", 23))},
		{"an intent id of 22 CJK characters passes", "", withKey("", strings.Repeat("日", 22))},
		{"the earliest due date passes", "", withDue(document.EarliestDueDate)},
		{"the last day of year 9999 passes", "", withDue("9999-12-31T23:59:59-01:00")},
		{"the longest intent id passes", "", withKey("", strings.Repeat("i", document.MaxKeyNameBytes-document.KeyTagBytes-len(".ics")))},
		{"the longest intent id of a scope passes", "", withKey("team-a", strings.Repeat("i", document.MaxKeyNameBytes-document.KeyTagBytes-len(".ics")-len("team-a~~")))},
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
