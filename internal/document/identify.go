package document

// Identity holds the ids a message names, as far as they can be read.
type Identity struct {
	IntentID string
	// Scope is the caller scope of the intent's key: the request's scope,
	// DefaultScope when it names none; empty when no intent id could be read
	// or the scope is not a ValidScope.
	Scope      string
	RequestID  string
	ApprovalID string
}

// Identify reads the intent, request and approval ids, and the intent's
// scope, from an envelope on a best-effort basis, for routing and receipts
// even when the gate refuses the message. Ids that are not plausible (see
// ValidID) are left empty. It never fails.
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
		if s, ok := m[name].(string); ok && ValidID(s) {
			return s
		}
		return ""
	}
	id := Identity{
		IntentID:   get(parts.Request, "intent_id"),
		RequestID:  get(parts.Request, "request_id"),
		ApprovalID: get(parts.Approval, "approval_id"),
	}
	if id.IntentID != "" {
		switch s, present := parts.Request.(map[string]any)["scope"]; {
		case !present:
			id.Scope = DefaultScope
		default:
			if s, ok := s.(string); ok && ValidScope(s) {
				id.Scope = s
			}
		}
	}
	return id
}
