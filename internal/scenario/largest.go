package scenario

import (
	"strings"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/document"
)

// Largest is the largest approved request the gate takes, written plainly
// (no escapes, no white space): every id, text and list at the bound the
// decoder puts on it, the longest scope with the longest intent id that
// fits the task services' key name, due and approval times with the
// longest fraction a timestamp may carry, a signed approval whose key id
// and signature are as long as an id may be. Its envelope is what the
// APPROVALS stream's message size bound must hold (topology.ApprovalMaxMsg).
// The signature is no real one: the checks that need no keys pass it.
func Largest() (Approved, error) {
	id := func(c string) string { return strings.Repeat(c, document.MaxIDBytes) }
	const whole = 1<<53 - 1
	c := document.Candidate{
		SchemaVersion: document.CandidateVersion,
		CandidateID:   id("c"),
		Source:        document.Source{TranscriptID: id("t"), Version: id("v")},
		Kind:          id("k"),
		Summary:       strings.Repeat("s", document.MaxTextBytes),
	}
	speaker := id("p")
	c.SpeakerRef = &speaker
	for range document.MaxEvidence {
		c.Evidence = append(c.Evidence, document.Evidence{Quote: strings.Repeat("q", document.MaxTextBytes), StartMS: whole, EndMS: whole})
	}
	candidate := mustJSON(c)
	scope := strings.Repeat("s", document.MaxScopeBytes)
	intent := strings.Repeat("i", document.MaxKeyNameBytes-document.KeyTagBytes-len(scope+"~~"+".ics"))
	f := For{Scope: scope, Destination: strings.Repeat("d", document.MaxDestinationBytes)}
	request, err := f.Request(candidate, id("r"), intent, strings.Repeat("T", document.MaxTitleBytes))
	if err != nil {
		return Approved{}, err
	}
	request = Edit(request, func(m map[string]any) {
		task := m["task"].(map[string]any)
		task["assignee_person_ref"] = id("a")
		task["due_at"] = longestTime("2026-11-30T09:00:00")
	})
	a, err := approve.Approve(candidate, request, approve.Options{By: id("b"), At: ApprovedAt, ID: id("A"), Key: TestKey()})
	if err != nil {
		return Approved{}, err
	}
	approval := Edit(mustJSON(a), func(m map[string]any) {
		m["approved_at"] = longestTime("2026-11-27T10:00:00")
		m["not_after"] = longestTime("2026-12-04T10:00:00")
		m["key_id"], m["signature"] = id("K"), id("S")
	})
	return Approved{Candidate: candidate, Request: request, Approval: approval}, nil
}

// longestTime is the date-time (to the second, in UTC) with as many
// fraction digits as a 64-byte timestamp holds.
func longestTime(toTheSecond string) string {
	return toTheSecond + "." + strings.Repeat("1", 64-len(toTheSecond+".Z")) + "Z"
}
