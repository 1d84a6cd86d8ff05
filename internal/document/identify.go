package document

// Identity holds the ids a message names, as far as they can be read.
type Identity struct {
	// Scope is the request's caller scope when it names a valid one (see
	// ValidScope), else "": absent, or not a scope. Subjects read "" as
	// DefaultScope, as Request.KeyScope does.
	Scope      string
	IntentID   string
	RequestID  string
	ApprovalID string
}

// Identify reads the scope and the intent, request and approval ids from an envelope on a
// best-effort basis, for routing and receipts even when the gate refuses the
// message. Ids that are not plausible (see ValidID) are left empty. It never fails.
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
	scope := ""
	if m, ok := parts.Request.(map[string]any); ok {
		if s, ok := m["scope"].(string); ok && ValidScope(s) {
			scope = s
		}
	}
	return Identity{
		Scope:      scope,
		IntentID:   get(parts.Request, "intent_id"),
		RequestID:  get(parts.Request, "request_id"),
		ApprovalID: get(parts.Approval, "approval_id"),
	}
}
