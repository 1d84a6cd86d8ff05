package redmine

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/sendtwice/sendtwice/taskservice"
)

// MarkVersion starts every mark.
const MarkVersion = "st1"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Mark is the value of the mark's custom field on the issue of (scope,
// intentID) created for a request with digest: "st1", the scope, the
// intent id escaped with url.QueryEscape (so it holds no space) and the
// digest, separated by single spaces.
func Mark(scope, intentID, digest string) string {
	return MarkPrefix(scope, intentID) + digest
}

// MarkPrefix is what every mark of (scope, intentID) starts with, whatever
// its digest: the lookup asks Redmine for issues whose field starts with it
// and then reads each mark exactly.
func MarkPrefix(scope, intentID string) string {
	if scope == "" {
		scope = taskservice.DefaultScope
	}
	return MarkVersion + " " + scope + " " + url.QueryEscape(intentID) + " "
}

// ParseMark reads a mark; ok is false for a value that is not one.
func ParseMark(v string) (scope, intentID, digest string, ok bool) {
	f := strings.Split(v, " ")
	if len(f) != 4 || f[0] != MarkVersion || !taskservice.ValidScope(f[1]) || f[2] == "" || !digestRE.MatchString(f[3]) {
		return "", "", "", false
	}
	id, err := url.QueryUnescape(f[2])
	if err != nil || url.QueryEscape(id) != f[2] {
		return "", "", "", false
	}
	return f[1], id, f[3], true
}

// checkRequest refuses a request the adapter cannot mark or create.
func checkRequest(req taskservice.Request) error {
	if !taskservice.ValidScope(req.KeyScope()) {
		return fmt.Errorf("redmine: scope %q is not 1 to %d bytes of [a-z0-9_-] starting with a letter or digit", req.Scope, taskservice.MaxScopeBytes)
	}
	if req.IntentID == "" {
		return fmt.Errorf("redmine: the intent id is empty")
	}
	if len(req.IntentID) > 512 {
		return fmt.Errorf("redmine: the intent id is %d bytes long, more than 512", len(req.IntentID))
	}
	if !digestRE.MatchString(req.RequestDigest) {
		return fmt.Errorf("redmine: request digest %q is not \"sha256:\" and 64 lower-case hexadecimal digits", req.RequestDigest)
	}
	return nil
}
