package caldav

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

// Resource names.
//
// One intent is one resource, named after its intent id. An intent id may
// hold any character (a slash, a space, a question mark, CJK), so it is
// encoded into one path segment that every server stores as it is:
//
//   - the bytes A-Z, a-z, 0-9, '-', '_' and '.' stand for themselves, except
//     a '.' at the start (servers hide or refuse names starting with a dot);
//   - every other byte, '~' included, is written as '~' and two upper-case
//     hexadecimal digits ("team/a b" → "team~2Fa~20b");
//   - ".ics" is appended.
//
// The result holds only characters that RFC 3986 calls unreserved, so it
// is the same before and after a server percent-decodes the path; it is
// never "." or "..", never starts with a dot and never ends with '~' (which
// Radicale refuses). Decoding accepts exactly the names encoding produces,
// so the mapping is one to one. Names are limited to MaxResourceNameBytes
// so that they fit a file name on the servers that store one file per
// resource; a longer intent id is refused, not shortened.

// Scoped names.
//
// A key is the pair (caller scope, intent id), and all scopes share the one
// collection: the task of an intent in scope taskservice.DefaultScope keeps
// the name above, so that tasks made before keys had scopes are found under
// their keys; in any other scope the name is the scope, "~~", and the
// encoded intent id ("team-a~~intent-0001.ics"). An encoded intent id
// never holds "~~" (every '~' is followed by two hexadecimal digits), so a
// name says which scope it belongs to, and the mapping stays one to one.

// scopeSeparator parts a scope from its encoded intent id in a name.
const scopeSeparator = "~~"

// Tagged names.
//
// With a mark key (Config.MarkKey) the name, and the task id, of a key
// carry its tag (proof.Tag of the scope and the intent id), so that the
// name of a future task cannot be guessed: the name above without ".ics",
// "~.", the tag's 32 lower-case hexadecimal digits, and ".ics"
// ("team-a~~intent-0001~.3f9c…e2.ics"); the task id, TaskID's followed by
// "~." and the tag. No name without a tag holds "~." (a '~' is followed by
// another '~' or two upper-case hexadecimal digits, and a '.' after "~~"
// is written "~2E"), so a name says whether it carries a tag.

// tagSeparator parts a name, or a task id, from its tag.
const tagSeparator = "~."

// MaxResourceNameBytes is the longest resource name, ".ics" and a tag
// included, that the adapter uses.
const MaxResourceNameBytes = 240

// ResourceSuffix ends every resource name.
const ResourceSuffix = ".ics"

// ErrResourceName is returned for an intent id that cannot be named, and
// for a name that ResourceName does not produce.
var ErrResourceName = errors.New("caldav: no resource name")

const upperHex = "0123456789ABCDEF"

func plainByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// ResourceName returns the resource name of an intent id: its encoding as
// described above, followed by ".ics".
func ResourceName(intentID string) (string, error) {
	if intentID == "" {
		return "", fmt.Errorf("%w: the intent id is empty", ErrResourceName)
	}
	var b strings.Builder
	for i := 0; i < len(intentID); i++ {
		c := intentID[i]
		if plainByte(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&0x0f])
	}
	b.WriteString(ResourceSuffix)
	if b.Len() > MaxResourceNameBytes {
		return "", fmt.Errorf("%w: the intent id encodes to a %d-byte resource name, longer than %d bytes", ErrResourceName, b.Len(), MaxResourceNameBytes)
	}
	return b.String(), nil
}

// ScopedResourceName returns the resource name of (scope, intentID): the
// scope's prefix (none for the default scope or an empty one) and
// ResourceName's encoding. A scope must be 1 to 64 bytes of [a-z0-9_-],
// starting with a letter or a digit.
func ScopedResourceName(scope, intentID string) (string, error) {
	if scope == "" || scope == taskservice.DefaultScope {
		return ResourceName(intentID)
	}
	if !document.ValidScope(scope) {
		return "", fmt.Errorf("%w: scope %q is not 1 to 64 bytes of [a-z0-9_-] starting with a letter or a digit", ErrResourceName, scope)
	}
	name, err := ResourceName(intentID)
	if err != nil {
		return "", err
	}
	name = scope + scopeSeparator + name
	if len(name) > MaxResourceNameBytes {
		return "", fmt.Errorf("%w: scope and intent id make a %d-byte resource name, longer than %d bytes", ErrResourceName, len(name), MaxResourceNameBytes)
	}
	return name, nil
}

// taggedResourceName returns the resource name of (scope, intentID) with
// tag: ScopedResourceName's, with tagSeparator and the tag before ".ics".
func taggedResourceName(scope, intentID, tag string) (string, error) {
	name, err := ScopedResourceName(scope, intentID)
	if err != nil {
		return "", err
	}
	name = strings.TrimSuffix(name, ResourceSuffix) + tagSeparator + tag + ResourceSuffix
	if len(name) > MaxResourceNameBytes {
		return "", fmt.Errorf("%w: scope, intent id and tag make a %d-byte resource name, longer than %d bytes", ErrResourceName, len(name), MaxResourceNameBytes)
	}
	return name, nil
}

// scopeAndIntentFromResourceName reverses ScopedResourceName and
// taggedResourceName: a name without a scope is in
// taskservice.DefaultScope; tag is empty for a name without one.
func scopeAndIntentFromResourceName(name string) (scope, intentID, tag string, err error) {
	if i := len(name) - len(ResourceSuffix) - proof.TagHexDigits - len(tagSeparator); i > 0 && name[i:i+len(tagSeparator)] == tagSeparator {
		tag = name[i+len(tagSeparator) : len(name)-len(ResourceSuffix)]
		if strings.Trim(tag, "0123456789abcdef") != "" || !strings.HasSuffix(name, ResourceSuffix) || len(name) > MaxResourceNameBytes {
			return "", "", "", fmt.Errorf("%w: %q holds %q but no tag of %d lower-case hexadecimal digits and %s after it, within %d bytes", ErrResourceName, name, tagSeparator, proof.TagHexDigits, ResourceSuffix, MaxResourceNameBytes)
		}
		name = name[:i] + ResourceSuffix
	}
	scope, intentID, err = scopeAndIntent(name)
	return scope, intentID, tag, err
}

// scopeAndIntent reverses ScopedResourceName.
func scopeAndIntent(name string) (scope, intentID string, err error) {
	scope, rest, ok := strings.Cut(name, scopeSeparator)
	if !ok {
		intentID, err = intentIDFromResourceName(name)
		return taskservice.DefaultScope, intentID, err
	}
	if !document.ValidScope(scope) || scope == taskservice.DefaultScope {
		return "", "", fmt.Errorf("%w: %q does not start with a scope other than %s and %q", ErrResourceName, name, taskservice.DefaultScope, scopeSeparator)
	}
	intentID, err = intentIDFromResourceName(rest)
	return scope, intentID, err
}

// intentIDFromResourceName reverses ResourceName. It refuses every name
// that ResourceName does not produce, so that one intent id has exactly one
// name.
func intentIDFromResourceName(name string) (string, error) {
	enc, ok := strings.CutSuffix(name, ResourceSuffix)
	if !ok || enc == "" || len(name) > MaxResourceNameBytes {
		return "", fmt.Errorf("%w: %q is not an encoded intent id followed by %s", ErrResourceName, name, ResourceSuffix)
	}
	out := make([]byte, 0, len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == '~':
			if i+2 >= len(enc) {
				return "", fmt.Errorf("%w: %q ends inside an escape", ErrResourceName, name)
			}
			hi, lo := unhex(enc[i+1]), unhex(enc[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: %q has an escape that is not '~' and two upper-case hexadecimal digits", ErrResourceName, name)
			}
			v := byte(hi<<4 | lo)
			if plainByte(v) && !(len(out) == 0 && v == '.') {
				return "", fmt.Errorf("%w: %q escapes %q, which stands for itself", ErrResourceName, name, v)
			}
			out = append(out, v)
			i += 2
		case plainByte(c) && !(i == 0 && c == '.'):
			out = append(out, c)
		default:
			return "", fmt.Errorf("%w: %q holds %q unescaped", ErrResourceName, name, c)
		}
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
