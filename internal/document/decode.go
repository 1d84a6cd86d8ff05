package document

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/sendtwice/sendtwice/internal/canon"
)

// Limits bound every document this package decodes.
// Numbers must be exactly what JCS writes for them (canon.Limits.ExactNumbers),
// so that no two different literals share a digest.
var Limits = canon.Limits{MaxBytes: MaxEnvelopeBytes, MaxDepth: 16, ExactNumbers: true}

// Maximum lengths, in bytes, of identifiers, titles and free text.
const (
	MaxIDBytes    = 256
	MaxTitleBytes = 1024
	MaxTextBytes  = 4096
)

// rfc3339 is the strict shape of a timestamp; time.Parse alone also takes
// forms RFC 3339 does not (a comma before the fraction, offsets like +24:00).
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// fullDate is the strict shape of an RFC 3339 full-date (YYYY-MM-DD).
var fullDate = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`)

// Sentinels for the rules a decoder can find broken. An *Error wraps one of
// these, or a canon error for input that is not strict JSON.
var (
	ErrSyntax        = errors.New("document: not strict JSON")
	ErrUnknownMember = errors.New("document: unknown member")
	ErrMissingMember = errors.New("document: missing member")
	ErrType          = errors.New("document: wrong type")
	ErrValue         = errors.New("document: invalid value")
	ErrSchemaVersion = errors.New("document: wrong schema_version")
)

// Rule names, carried by *Error.
const (
	RuleSyntax        = "syntax"
	RuleUnknownMember = "unknown_member"
	RuleMissingMember = "missing_member"
	RuleType          = "type"
	RuleValue         = "value"
	RuleSchemaVersion = "schema_version"
)

// Error is a refusal of the strict decoder: where (a path such as
// $.request.task.title), which rule, and a reason a person can act on.
type Error struct {
	Path   string
	Rule   string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("document: %s at %s: %s", e.Rule, e.Path, e.Reason)
}

// Unwrap returns the sentinel (or the canon error) behind the refusal.
func (e *Error) Unwrap() error { return e.Err }

// Parse reads one strict JSON text within Limits into canon's value tree.
func Parse(data []byte) (any, error) {
	return parseWith(data, nil)
}

// parseWith is Parse filling the objects that scratch kept (canon.ParseWith),
// or new ones when scratch is nil.
func parseWith(data []byte, scratch *canon.Scratch) (any, error) {
	v, err := canon.ParseWith(data, Limits, scratch)
	if err != nil {
		var ce *canon.Error
		if errors.As(err, &ce) {
			return nil, &Error{Path: ce.Path, Rule: RuleSyntax, Reason: ce.Reason, Err: err}
		}
		return nil, &Error{Path: "$", Rule: RuleSyntax, Reason: err.Error(), Err: err}
	}
	return v, nil
}

// reader walks a value tree and keeps the first refusal.
type reader struct{ err *Error }

func (r *reader) fail(path, rule string, sentinel error, format string, args ...any) {
	if r.err == nil {
		r.err = &Error{Path: path, Rule: rule, Reason: fmt.Sprintf(format, args...), Err: sentinel}
	}
}

func (r *reader) result() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// join is path + "." + name. The decoders name the path of every member
// they read, and the same few paths come up for every document, so the
// strings are kept (up to maxPaths of them) instead of being built again
// each time.
func join(path, name string) string {
	if c := (*paths.Load())[path]; c != nil {
		if s, ok := c.members[name]; ok {
			return s
		}
	}
	return keep(path, name, -1, path+"."+name)
}

// indexed is path + "[i]".
func indexed(path string, i int) string {
	if c := (*paths.Load())[path]; c != nil && i < maxKeptIndex && c.items[i] != "" {
		return c.items[i]
	}
	return keep(path, "", i, path+"["+strconv.Itoa(i)+"]")
}

// childPaths are the paths kept under one path: of its members by name, and
// of its first array items.
type childPaths struct {
	members map[string]string
	items   [maxKeptIndex]string
}

// maxPaths bounds the paths kept, and maxKeptIndex the array items whose
// paths are kept, so that one long array cannot fill the set: beyond them
// paths are built each time.
const (
	maxPaths     = 4096
	maxKeptIndex = 16
)

// paths holds the kept paths by the path they are under. Readers load it
// without a lock; a new path replaces the map with a copy that holds it
// (written under keeping), so that a map once published never changes.
var (
	paths   atomic.Pointer[map[string]*childPaths]
	keeping struct {
		sync.Mutex
		n int // paths kept
	}
)

func init() {
	paths.Store(&map[string]*childPaths{})
}

// keep returns s, the path of the member name (or, for index >= 0, of the
// array item index) under path, and keeps it unless it is a path of a far
// item or the set is full.
func keep(path, name string, index int, s string) string {
	if farItem(s) {
		return s
	}
	keeping.Lock()
	defer keeping.Unlock()
	if keeping.n >= maxPaths {
		return s
	}
	old := *paths.Load()
	c := &childPaths{members: make(map[string]string)}
	if prev := old[path]; prev != nil {
		if kept, ok := prev.members[name]; index < 0 && ok {
			return kept
		}
		if index >= 0 && prev.items[index] != "" {
			return prev.items[index]
		}
		c.items = prev.items
		maps.Copy(c.members, prev.members)
	}
	if index >= 0 {
		c.items[index] = s
	} else {
		c.members[name] = s
	}
	next := maps.Clone(old)
	next[path] = c
	paths.Store(&next)
	keeping.n++
	return s
}

// farItem reports whether a path passes through an array item at or beyond
// maxKeptIndex.
func farItem(path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] != '[' {
			continue
		}
		n := 0
		for i++; i < len(path) && path[i] >= '0' && path[i] <= '9'; i++ {
			if n = n*10 + int(path[i]-'0'); n >= maxKeptIndex {
				return true
			}
		}
	}
	return false
}

// object checks that v is an object holding exactly the named members. A name
// ending in "?" is optional. Unknown members are reported first, so that a
// case variant ("Title") is named as what it is.
func (r *reader) object(path string, v any, names ...string) map[string]any {
	if r.err != nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.fail(path, RuleType, ErrType, "must be an object, not %s", canon.TypeName(v))
		return nil
	}
	unknown, first := false, ""
	for k := range m {
		if !isMember(k, names) && (!unknown || k < first) {
			unknown, first = true, k
		}
	}
	if unknown {
		hint := ""
		for _, n := range names {
			if k := strings.TrimSuffix(n, "?"); strings.EqualFold(k, first) {
				hint = fmt.Sprintf(" (member names are case-sensitive: did you mean %q?)", k)
			}
		}
		r.fail(join(path, first), RuleUnknownMember, ErrUnknownMember, "member %q is not part of this document%s", first, hint)
		return nil
	}
	for _, n := range names {
		if strings.HasSuffix(n, "?") {
			continue
		}
		if _, ok := m[n]; !ok {
			r.fail(join(path, n), RuleMissingMember, ErrMissingMember, "required member %q is missing", n)
			return nil
		}
	}
	return m
}

// isMember reports whether k is one of names, where a name may end in "?".
func isMember(k string, names []string) bool {
	for _, n := range names {
		if strings.TrimSuffix(n, "?") == k {
			return true
		}
	}
	return false
}

// str returns v as a string; without one (or after an earlier error) it
// returns false, failing at path when v is of another type.
func (r *reader) str(path string, v any) (string, bool) {
	if r.err != nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		r.fail(path, RuleType, ErrType, "must be a string, not %s", canon.TypeName(v))
	}
	return s, ok
}

func (r *reader) text(path string, v any, maxBytes int) string {
	s, ok := r.str(path, v)
	if !ok {
		return ""
	}
	switch {
	case strings.TrimSpace(s) == "":
		r.fail(path, RuleValue, ErrValue, "must not be empty")
	case len(s) > maxBytes:
		r.fail(path, RuleValue, ErrValue, "is %d bytes long; at most %d are allowed", len(s), maxBytes)
	case !utf8.ValidString(s):
		r.fail(path, RuleValue, ErrValue, "is not valid UTF-8")
	}
	return s
}

// valid returns s, read without an error so far, when ok(s); otherwise it
// fails at path with the message format and returns "".
func (r *reader) valid(path, s string, ok func(string) bool, format string, args ...any) string {
	if r.err == nil && !ok(s) {
		r.fail(path, RuleValue, ErrValue, format, args...)
		return ""
	}
	return s
}

// isRFC3339 reports whether s is an RFC 3339 date-time, written in full.
func isRFC3339(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil && rfc3339.MatchString(s)
}

// line is free text on one line: no control characters (line breaks, tabs).
func (r *reader) line(path string, v any, maxBytes int) string {
	s := r.text(path, v, maxBytes)
	if r.err != nil {
		return ""
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			r.fail(path, RuleValue, ErrValue, "must be one line without control characters (found %U)", c)
			return ""
		}
	}
	return s
}

// id is a non-empty identifier without spaces, control or format characters.
func (r *reader) id(path string, v any) string {
	return r.valid(path, r.text(path, v, MaxIDBytes), ValidID,
		"must not contain spaces, control or format characters")
}

// intentID is an id in Unicode Normalization Form C. The intent id is the
// idempotency key and is compared byte for byte, so one intent must have one
// spelling: "café" with U+00E9 and with e + U+0301 would otherwise be two
// intents and two tasks. It is refused, not normalised: the request's
// digest, which the approval binds, covers the intent id as written.
func (r *reader) intentID(path string, v any) string {
	return r.valid(path, r.id(path, v), NFC,
		"must be in Unicode normalization form C (NFC): one intent has one spelling; normalise the intent id and approve the request again")
}

// scope is a caller scope (ValidScope).
func (r *reader) scope(path string, v any) string {
	return r.valid(path, r.text(path, v, MaxScopeBytes), ValidScope,
		"must be 1 to 64 lower-case letters, digits, '-' and '_', starting with a letter or digit (it is one subject token)")
}

// NFC reports whether s is in Unicode Normalization Form C.
func NFC(s string) bool { return norm.NFC.IsNormalString(s) }

// ValidID reports whether s is a plausible identifier: 1 to MaxIDBytes bytes
// of valid UTF-8 with only graphic, non-space characters.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDBytes || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if !unicode.IsGraphic(c) || unicode.IsSpace(c) {
			return false
		}
	}
	return true
}

func (r *reader) constant(path string, v any, want, rule string, sentinel error) {
	if r.err != nil {
		return
	}
	s, ok := v.(string)
	if !ok || s != want {
		got := canon.TypeName(v)
		if ok {
			got = fmt.Sprintf("%q", s)
		}
		r.fail(path, rule, sentinel, "must be %q, not %s", want, got)
	}
}

func (r *reader) digest(path string, v any) string {
	return r.valid(path, r.text(path, v, MaxIDBytes), canon.ValidDigest,
		"must be \"sha256:\" followed by 64 lower-case hex digits")
}

func (r *reader) timestamp(path string, v any) string {
	return r.valid(path, r.text(path, v, 64), isRFC3339,
		"must be an RFC 3339 date-time such as 2026-11-30T09:00:00Z")
}

// due is a due date: an RFC 3339 date-time, or a full-date for a task due
// on a day.
func (r *reader) due(path string, v any) string {
	s := r.text(path, v, 64)
	if r.err != nil {
		return ""
	}
	switch {
	case fullDate.MatchString(s):
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			r.fail(path, RuleValue, ErrValue, "%q is not a day of the calendar", s)
			return s
		}
	case !isRFC3339(s):
		r.fail(path, RuleValue, ErrValue, "must be an RFC 3339 date-time such as 2026-11-30T09:00:00Z, or a date such as 2026-11-30")
		return s
	}
	// Both forms start with the day, as written.
	if s[:len(time.DateOnly)] < EarliestDueDate {
		r.fail(path, RuleValue, ErrValue, "%q is before %s, the earliest due date every task service takes", s, EarliestDueDate)
	}
	return s
}

// provider is one of the known providers.
func (r *reader) provider(path string, v any) string {
	s, ok := r.str(path, v)
	if !ok {
		return ""
	}
	if _, known := CapabilityOf(s); !known {
		r.fail(path, RuleValue, ErrValue, "unknown provider %q: a request names the task service it is for, one of %s",
			s, strings.Join(ProviderNames(), ", "))
		return ""
	}
	return s
}

// destination is a destination name (ValidDestination).
func (r *reader) destination(path string, v any) string {
	return r.valid(path, r.text(path, v, MaxDestinationBytes), ValidDestination,
		"must be 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter (leave it out for the destination %q)", DefaultDestination)
}

// nullable returns nil for JSON null and otherwise reads v with read.
func (r *reader) nullable(path string, v any, read func(string, any) string) *string {
	if r.err != nil || v == nil {
		return nil
	}
	s := read(path, v)
	return &s
}

func (r *reader) integer(path string, v any) int64 {
	if r.err != nil {
		return 0
	}
	f, ok := v.(float64)
	if !ok {
		r.fail(path, RuleType, ErrType, "must be a number, not %s", canon.TypeName(v))
		return 0
	}
	// From 2^53 on, doubles skip integers: 2^53+1 would read as 2^53.
	if f != math.Trunc(f) || f < 0 || f >= 1<<53 {
		r.fail(path, RuleValue, ErrValue, "must be a whole number from 0 to 2^53-1")
		return 0
	}
	return int64(f)
}

func (r *reader) array(path string, v any, minItems int) []any {
	if r.err != nil {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		r.fail(path, RuleType, ErrType, "must be an array, not %s", canon.TypeName(v))
		return nil
	}
	if len(a) < minItems {
		r.fail(path, RuleValue, ErrValue, "must hold at least %d item(s)", minItems)
		return nil
	}
	return a
}

func (r *reader) schemaVersion(path string, m map[string]any, want string) {
	r.constant(join(path, "schema_version"), m["schema_version"], want, RuleSchemaVersion, ErrSchemaVersion)
}
