package document

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sendtwice/sendtwice/internal/canon"
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
	// scratch holds the trees' objects, which Release gives back.
	scratch *canon.Scratch
}

// scratches keep the objects of envelopes released, for the next ones.
var scratches = sync.Pool{New: func() any { return new(canon.Scratch) }}

// Release gives the trees' objects back for the next SplitEnvelope to fill:
// the parts must not be used after, nor any object or array taken from
// them (strings stay valid). Parts that are not released are collected as
// any other value.
func (p *EnvelopeParts) Release() {
	if s := p.scratch; s != nil {
		p.scratch, p.Candidate, p.Request, p.Approval = nil, nil, nil, nil
		s.Reset()
		scratches.Put(s)
	}
}

// SplitEnvelope parses data as strict JSON and checks the envelope's own
// members: schema_version, candidate, request and an optional approval. It
// does not look inside them.
func SplitEnvelope(data []byte) (*EnvelopeParts, error) {
	scratch := scratches.Get().(*canon.Scratch)
	v, err := parseWith(data, scratch)
	if err != nil {
		scratch.Reset()
		scratches.Put(scratch)
		return nil, err
	}
	var r reader
	m := r.object("$", v, "schema_version", MemberCandidate, MemberRequest, MemberApproval+"?")
	if m != nil {
		r.schemaVersion("$", m, EnvelopeVersion)
	}
	if r.err != nil {
		// The refusal holds strings only.
		scratch.Reset()
		scratches.Put(scratch)
		return nil, r.result()
	}
	return &EnvelopeParts{Candidate: m[MemberCandidate], Request: m[MemberRequest], Approval: m[MemberApproval], scratch: scratch}, nil
}
