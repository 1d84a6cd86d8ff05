package canon

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them; test with errors.Is.
var (
	ErrEmpty           = errors.New("canon: empty input")
	ErrSyntax          = errors.New("canon: invalid JSON")
	ErrTrailingData    = errors.New("canon: data after the JSON value")
	ErrDuplicateName   = errors.New("canon: duplicate member name")
	ErrInvalidUTF8     = errors.New("canon: invalid UTF-8")
	ErrLoneSurrogate   = errors.New("canon: lone surrogate in \\u escape")
	ErrNumberRange     = errors.New("canon: number is not a finite IEEE-754 double")
	ErrNumberInexact   = errors.New("canon: number is not exactly a double")
	ErrTooLarge        = errors.New("canon: input too large")
	ErrTooDeep         = errors.New("canon: nesting too deep")
	ErrUnsupportedType = errors.New("canon: unsupported value")
)

// Error describes why a document was refused.
//
// Offset is the byte offset in the input where the problem was found; it is
// -1 for errors that do not come from parsing input (Encode, AppendNumber).
// Path locates the offending value for humans: "$" is the root, members are
// written ".name" (names as they are, without quoting) and array elements
// "[i]", for example "$.evidence[0].quote". For a duplicate member name Path is
// the object holding it and the name is in Reason. Path is empty when there is
// no document to point into. Reason says what is wrong; Err is the sentinel.
type Error struct {
	Offset int
	Path   string
	Reason string
	Err    error
}

// Error formats the error as
// `canon: duplicate member name "a" at $.request.task (offset 57)`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("canon: ")
	switch {
	case e.Reason != "":
		b.WriteString(e.Reason)
	case e.Err != nil:
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "canon: "))
	default:
		b.WriteString("error")
	}
	if e.Path != "" {
		b.WriteString(" at ")
		b.WriteString(e.Path)
	}
	if e.Offset >= 0 {
		b.WriteString(" (offset ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the sentinel error, so that errors.Is works.
func (e *Error) Unwrap() error { return e.Err }

// pathSeg is one step of a path: a member name or an array index.
type pathSeg struct {
	name    string
	index   int
	isIndex bool
}

// formatPath renders a path stack; it is only called when reporting an error.
func formatPath(segs []pathSeg) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range segs {
		if s.isIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		} else {
			b.WriteByte('.')
			b.WriteString(s.name)
		}
	}
	return b.String()
}
