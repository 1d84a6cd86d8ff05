package redmine

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// MarkVersion starts a mark without a tag: what an adapter given no mark
// key makes, and what every adapter made before mark keys.
const MarkVersion = "st1"

// TaggedMarkVersion starts a mark with a tag: what an adapter given a mark
// key makes.
const TaggedMarkVersion = "st2"

// markPurpose is the purpose of a mark's tag (proof.Tag).
const markPurpose = "redmine mark"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Mark is the untagged mark (MarkVersion) of the issue of (scope,
// intentID) created for a request with digest: "st1", the scope, the
// intent id escaped with url.QueryEscape (so it holds no space) and the
// digest, separated by single spaces.
func Mark(scope, intentID, digest string) string {
	return MarkPrefix(scope, intentID) + digest
}

// TaggedMark is the mark an adapter with the mark key key writes:
// "st2", the scope, the escaped intent id, the digest and the tag
// proof.Tag(key, "redmine mark", scope, intent id, digest), separated by
// single spaces.
func TaggedMark(key []byte, scope, intentID, digest string) string {
	scope = scopeOrDefault(scope)
	return markPrefix(TaggedMarkVersion, scope, intentID) + digest + " " + proof.Tag(key, markPurpose, scope, intentID, digest)
}

// MarkPrefix is what every untagged mark of (scope, intentID) starts
// with, whatever its digest. A lookup asks Redmine for the issues whose
// field starts with it, and for those whose field starts with the tagged
// marks' prefix (the same with "st2"), and then reads each mark exactly.
func MarkPrefix(scope, intentID string) string {
	return markPrefix(MarkVersion, scopeOrDefault(scope), intentID)
}

func markPrefix(version, scope, intentID string) string {
	return version + " " + scope + " " + url.QueryEscape(intentID) + " "
}

func scopeOrDefault(scope string) string {
	if scope == "" {
		return taskservice.DefaultScope
	}
	return scope
}

// markFields is what a mark says; tag is empty in an untagged mark.
type markFields struct {
	version, scope, intentID, digest, tag string
}

// ParseMark reads a mark of either version, without checking its tag (a
// tagged mark whose tag is missing is read too); ok is false for a value
// that is not one.
func ParseMark(v string) (scope, intentID, digest string, ok bool) {
	m, ok := parseMark(v)
	return m.scope, m.intentID, m.digest, ok
}

func parseMark(v string) (markFields, bool) {
	f := strings.Split(v, " ")
	var m markFields
	switch {
	case len(f) == 4 && f[0] == MarkVersion:
	case len(f) == 4 && f[0] == TaggedMarkVersion:
		// A tagged mark without its tag: read, so that it is reported.
	case len(f) == 5 && f[0] == TaggedMarkVersion && f[4] != "":
		m.tag = f[4]
	default:
		return markFields{}, false
	}
	if !taskservice.ValidScope(f[1]) || f[2] == "" || !digestRE.MatchString(f[3]) {
		return markFields{}, false
	}
	id, err := url.QueryUnescape(f[2])
	if err != nil || url.QueryEscape(id) != f[2] {
		return markFields{}, false
	}
	m.version, m.scope, m.intentID, m.digest = f[0], f[1], id, f[3]
	return m, true
}

// mark is the mark the adapter writes on the issue of req: tagged when
// it has a mark key.
func (a *Adapter) mark(req taskservice.Request) string {
	if a.markKey == nil {
		return Mark(req.KeyScope(), req.IntentID, req.RequestDigest)
	}
	return TaggedMark(a.markKey, req.KeyScope(), req.IntentID, req.RequestDigest)
}

// author is an issue's author as GET issues.json shows it.
type author struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// unproven says why an issue with mark m by by is not proven to be this
// deployment's: its author is not the API key's user, or its tag does not
// match under the mark key. An untagged mark by the API key's user is
// proven: the pipeline made it before it had a key. "" when it is proven,
// and for every issue when the adapter has no mark key.
func (a *Adapter) unproven(t target, m markFields, by author) string {
	if a.markKey == nil {
		return ""
	}
	var why []string
	if by.ID != t.userID {
		why = append(why, fmt.Sprintf("was not made by this deployment (author %q, user #%d, not this API key's user %q, #%d)", by.Name, by.ID, t.userLogin, t.userID))
	}
	if m.version == TaggedMarkVersion && !proof.Valid(a.markKey, m.tag, markPurpose, m.scope, m.intentID, m.digest) {
		why = append(why, "its tag is not the one this deployment's mark key makes for it")
	}
	return strings.Join(why, ", and ")
}

// notFor says, for a result's Reason, which issues claim the key without
// proof and were not taken as its task ("" when none).
func notFor(ignored []Issue) string {
	notes := make([]string, len(ignored))
	for i, is := range ignored {
		notes[i] = fmt.Sprintf("issue #%d carries this key's mark but %s; it was not taken as this key's task", is.ID, is.Unproven)
	}
	return strings.Join(notes, "; ")
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
