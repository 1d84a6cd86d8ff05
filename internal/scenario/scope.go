package scenario

import (
	"fmt"

	"github.com/sendtwice/sendtwice/internal/approve"
)

// InScope is the request of a with its caller scope set to scope, approved
// again as the seed approves (signed when the seed is), with a's approval
// id, so that the approval binds the scoped request.
func (s *Seed) InScope(a Approved, scope string) (Approved, error) {
	req := Edit(a.Request, func(m map[string]any) { m["scope"] = scope })
	o := s.opts
	Edit(a.Approval, func(m map[string]any) { o.ID, _ = m["approval_id"].(string) })
	if o.By == "" {
		o.By = Reviewer
	}
	if o.At.IsZero() {
		o.At = ApprovedAt
	}
	ap, err := approve.Approve(a.Candidate, req, o)
	if err != nil {
		return Approved{}, fmt.Errorf("scenario: approving the request in scope %q: %w", scope, err)
	}
	return Approved{Candidate: a.Candidate, Request: req, Approval: mustJSON(ap)}, nil
}
