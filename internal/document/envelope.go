package document

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// BuildEnvelope lays three documents side by side in a task-envelope.v1,
// keeping each one's bytes (compacted) so that its digest is unchanged. A nil
// approval leaves the member out, for sending an unapproved message on purpose.
func BuildEnvelope(candidate, request, approval []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"schema_version":"` + EnvelopeVersion + `"`)
	for _, m := range []struct {
		name string
		doc  []byte
	}{{MemberCandidate, candidate}, {MemberRequest, request}, {MemberApproval, approval}} {
		if m.doc == nil {
			continue
		}
		b.WriteString(`,"` + m.name + `":`)
		if err := json.Compact(&b, m.doc); err != nil {
			return nil, fmt.Errorf("document: compacting the %s: %w", m.name, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Envelope member names.
const (
	MemberCandidate = "candidate"
	MemberRequest   = "request"
	MemberApproval  = "approval"
)

// EnvelopeParts is an envelope split into its members, each still a value
// tree, so that the gate can check the approval separately from the rest.
// Approval is nil when the member is missing or null.
type EnvelopeParts struct {
	Candidate, Request, Approval any
}

// SplitEnvelope parses data as strict JSON and checks the envelope's own
// members: schema_version, candidate, request and an optional approval. It
// does not look inside them.
func SplitEnvelope(data []byte) (*EnvelopeParts, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	var r reader
	m := r.object("$", v, "schema_version", MemberCandidate, MemberRequest, MemberApproval+"?")
	if m == nil {
		return nil, r.result()
	}
	r.schemaVersion("$", m, EnvelopeVersion)
	if r.err != nil {
		return nil, r.result()
	}
	return &EnvelopeParts{Candidate: m[MemberCandidate], Request: m[MemberRequest], Approval: m[MemberApproval]}, nil
}
