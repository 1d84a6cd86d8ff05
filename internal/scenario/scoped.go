package scenario

import (
	"fmt"

	"github.com/sendtwice/sendtwice/internal/approve"
)

// ApproveInScope is ApproveWith for a request that names the caller scope
// scope ("" names none: the request lands in the default scope). The
// approval binds the request's digest, and with it the scope.
func ApproveInScope(candidate []byte, scope, requestID, intentID, title string, opts approve.Options) (Approved, error) {
	req, err := Request(candidate, requestID, intentID, title)
	if err != nil {
		return Approved{}, err
	}
	if scope != "" {
		req = Edit(req, func(m map[string]any) { m["scope"] = scope })
	}
	if opts.By == "" {
		opts.By = Reviewer
	}
	if opts.At.IsZero() {
		opts.At = ApprovedAt
	}
	a, err := approve.Approve(candidate, req, opts)
	if err != nil {
		return Approved{}, fmt.Errorf("scenario: approving %s in scope %q: %w", requestID, scope, err)
	}
	return Approved{Candidate: candidate, Request: req, Approval: mustJSON(a)}, nil
}
