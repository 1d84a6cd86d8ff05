package scenario

import "github.com/sendtwice/sendtwice/internal/approve"

// ApproveInScope is ApproveWith for a request that names the caller scope
// scope ("" names none: the request lands in the default scope). The
// approval binds the request's digest, and with it the scope.
func ApproveInScope(candidate []byte, scope, requestID, intentID, title string, opts approve.Options) (Approved, error) {
	return For{}.InScope(scope).ApproveWith(candidate, requestID, intentID, title, opts)
}
