package document

import (
	"unicode/utf8"
)

// Identity holds the ids a message names, as far as they can be read.
type Identity struct {
	IntentID   string
	RequestID  string
	ApprovalID string
}

// Identify reads the intent, request and approval ids from an envelope on a
// best-effort basis, for routing and receipts even when the gate refuses the
// message. Ids that are not plausible strings (too long, not UTF-8, control
// characters) are left empty. It never fails.
func Identify(envelope []byte) Identity {
	parts, err := SplitEnvelope(envelope)
	if err != nil {
		return Identity{}
	}
	get := func(v any, name string) string {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		s, ok := m[name].(string)
		if !ok || s == "" || len(s) > MaxIDBytes || !utf8.ValidString(s) {
			return ""
		}
		for _, c := range s {
			if c <= ' ' || c == 0x7f {
				return ""
			}
		}
		return s
	}
	return Identity{
		IntentID:   get(parts.Request, "intent_id"),
		RequestID:  get(parts.Request, "request_id"),
		ApprovalID: get(parts.Approval, "approval_id"),
	}
}
