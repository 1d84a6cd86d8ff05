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
