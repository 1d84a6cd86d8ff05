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

// Release gives the trees' objects back for the next SplitEnvelopeToRelease
// to fill: the parts must not be used after, nor any object or array taken
// from them (strings stay valid). It does nothing to parts of SplitEnvelope.
func (p *EnvelopeParts) Release() {
	if s := p.scratch; s != nil {
		p.scratch, p.Candidate, p.Request, p.Approval = nil, nil, nil, nil
		releaseScratch(s)
	}
}

func releaseScratch(s *canon.Scratch) {
	s.Reset()
	scratches.Put(s)
}

// SplitEnvelope parses data as strict JSON and checks the envelope's own
// members: schema_version, candidate, request and an optional approval. It
// does not look inside them.
func SplitEnvelope(data []byte) (*EnvelopeParts, error) {
	return splitEnvelope(data, nil)
}

// SplitEnvelopeToRelease is SplitEnvelope for a caller that drops the parts
// once it has read them, and gives them back with Release: their objects
// are filled again by a later call, instead of being allocated anew.
func SplitEnvelopeToRelease(data []byte) (*EnvelopeParts, error) {
	scratch := scratches.Get().(*canon.Scratch)
	parts, err := splitEnvelope(data, scratch)
	if err != nil {
		// The refusal holds strings only.
		releaseScratch(scratch)
		return nil, err
	}
	parts.scratch = scratch
	return parts, nil
}

// splitEnvelope is SplitEnvelope, with the objects from scratch when it is
// not nil.
func splitEnvelope(data []byte, scratch *canon.Scratch) (*EnvelopeParts, error) {
	v, err := parseWith(data, scratch)
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
