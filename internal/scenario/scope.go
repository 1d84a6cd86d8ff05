package scenario

import (
	"fmt"

	"github.com/sendtwice/sendtwice/internal/approve"
)

// InScope is the request of a with its caller scope set to scope, approved
// again (unsigned, by the scenario's reviewer at ApprovedAt, with a's
// approval id), so that the approval binds the scoped request.
func InScope(a Approved, scope string) (Approved, error) {
	req := Edit(a.Request, func(m map[string]any) { m["scope"] = scope })
	id := ""
	Edit(a.Approval, func(m map[string]any) { id, _ = m["approval_id"].(string) })
	ap, err := approve.Approve(a.Candidate, req, approve.Options{By: Reviewer, At: ApprovedAt, ID: id})
	if err != nil {
		return Approved{}, fmt.Errorf("scenario: approving the request in scope %q: %w", scope, err)
	}
	return Approved{Candidate: a.Candidate, Request: req, Approval: mustJSON(ap)}, nil
}
