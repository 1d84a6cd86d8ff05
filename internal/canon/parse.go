package canon

import (
	"fmt"
	"unicode/utf8"
)

// Limits bound what Parse accepts. Zero fields mean "use the default".
// Negative fields are treated like zero. MaxDepth is capped at 10,000.
type Limits struct {
	MaxBytes int // default 1 MiB
	MaxDepth int // nesting of arrays/objects; default 64
	// ExactNumbers refuses (ErrNumberInexact) a number literal whose value
	// differs from the number JCS writes for it: the literal must be, up to
	// notation (trailing zeros, exponent form, the sign of zero), the
	// shortest decimal that reads back as the same double. "1.0", "1e2",
	// "4.50" and "0.1" pass (JCS writes 1, 100, 4.5 and 0.1);
	// "9007199254740993", "9007199254740992.4", "333333333.33333329" and
	// "1e-400" do not, as two such literals could otherwise share a digest.
	// Without it, such literals are rounded to the nearest double as RFC 8785
	// prescribes.
	ExactNumbers bool
}

// ExactLimits are DefaultLimits with ExactNumbers: what the project's
// documents and digests use (CanonicalizeExact, DigestExact).
var ExactLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 64, ExactNumbers: true}

// DefaultLimits are the limits used by Canonicalize and Digest.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 64}

// maxNesting is the hard ceiling on nesting for Parse and Encode. It keeps the
// recursion of both far away from the goroutine stack limit.
const maxNesting = 10000

// Parse parses one strict JSON text (RFC 8259 + I-JSON, RFC 7493) into a value
// tree: nil, bool, float64, string, []any, map[string]any. It refuses: empty
// input, syntax errors, trailing data after the value (white space allowed),
// duplicate member names (exact, after unescaping), invalid UTF-8 anywhere,
// lone surrogates in \u escapes, numbers that overflow IEEE-754 double (e.g.
// 1e400), input over MaxBytes, nesting over MaxDepth. Errors are *Error values
// wrapping one of the sentinels. Parse never panics. The tree's strings share
// one copy of the input (data may change afterwards): a string kept from the
// tree keeps that copy alive.
func Parse(data []byte, lim Limits) (any, error) {
	return parse(data, lim, nil)
}

// parse is Parse, with the objects' maps, the arrays and the path taken
// from scratch when it is not nil.
func parse(data []byte, lim Limits, scratch *Scratch) (any, error) {
	maxBytes := lim.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultLimits.MaxBytes
	}
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultLimits.MaxDepth
	}
	maxDepth = min(maxDepth, maxNesting)

	p := parser{data: data, maxDepth: maxDepth, exact: lim.ExactNumbers, scratch: scratch}
	if scratch != nil {
		p.path = scratch.path[:0]
	}
	if len(data) > maxBytes {
		return nil, p.fail(maxBytes, ErrTooLarge,
			fmt.Sprintf("input of %d bytes is over the limit of %d", len(data), maxBytes))
	}
	if len(data) == 0 {
		return nil, p.fail(0, ErrEmpty, "empty input")
	}
	// One copy of the input, of which the strings without escapes are
	// slices: one allocation instead of one per string and member name.
	p.src = string(data)
	p.skipSpace()
	if p.pos == len(data) {
		return nil, p.fail(0, ErrEmpty, "input holds only white space")
	}
	v, err := p.value()
	if scratch != nil {
		scratch.path = p.path[:0]
	}
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(data) {
		if e := p.badUTF8(p.pos); e != nil {
			return nil, e
		}
		return nil, p.fail(p.pos, ErrTrailingData,
			"data after the JSON value: "+describeAt(data, p.pos))
	}
	return v, nil
}

type parser struct {
	data     []byte
	src      string // data as a string
	pos      int
	depth    int
	maxDepth int
	exact    bool // Limits.ExactNumbers
	path     []pathSeg
	scratch  *Scratch // nil: new maps
}

func (p *parser) fail(off int, sentinel error, reason string) *Error {
	return &Error{Offset: off, Path: formatPath(p.path), Reason: reason, Err: sentinel}
}

// badUTF8 reports ErrInvalidUTF8 if the byte at off starts an invalid UTF-8
// sequence, and nil otherwise.
func (p *parser) badUTF8(off int) *Error {
	if off >= len(p.data) || p.data[off] < utf8.RuneSelf {
		return nil
	}
	if r, size := utf8.DecodeRune(p.data[off:]); r == utf8.RuneError && size <= 1 {
		return p.fail(off, ErrInvalidUTF8, fmt.Sprintf("invalid UTF-8 byte 0x%02x", p.data[off]))
	}
	return nil
}

// unexpected reports the byte at p.pos (or the end of input) as a syntax error
// while looking for want. Invalid UTF-8 there is reported as such.
func (p *parser) unexpected(want string) *Error {
	if p.pos >= len(p.data) {
		return p.fail(p.pos, ErrSyntax, "unexpected end of input, expected "+want)
	}
	if e := p.badUTF8(p.pos); e != nil {
		return e
	}
	if p.pos == 0 && len(p.data) >= 3 && p.data[0] == 0xEF && p.data[1] == 0xBB && p.data[2] == 0xBF {
		return p.fail(0, ErrSyntax, "byte order mark is not allowed")
	}
	return p.fail(p.pos, ErrSyntax, "unexpected "+describeAt(p.data, p.pos)+", expected "+want)
}

// describeAt names the character at off for an error message.
func describeAt(data []byte, off int) string {
	c := data[off]
	if c < utf8.RuneSelf {
		if c < 0x20 || c == 0x7f {
			return fmt.Sprintf("control character U+%04X", c)
		}
		return fmt.Sprintf("character %q", rune(c))
	}
	r, _ := utf8.DecodeRune(data[off:])
	return fmt.Sprintf("character %q (U+%04X)", r, r)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value starting at p.pos; white space before it has been
// skipped.
func (p *parser) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.unexpected("a value")
	}
	switch c := p.data[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	case 'n':
		return nil, p.literal("null")
	case 'N':
		if p.hasPrefix("NaN") {
			return nil, p.fail(p.pos, ErrSyntax, "NaN is not a JSON value")
		}
	case 'I':
		if p.hasPrefix("Infinity") {
			return nil, p.fail(p.pos, ErrSyntax, "Infinity is not a JSON value")
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
	}
	return nil, p.unexpected("a value")
}

func (p *parser) hasPrefix(s string) bool {
	return len(p.data)-p.pos >= len(s) && string(p.data[p.pos:p.pos+len(s)]) == s
}

func (p *parser) literal(lit string) error {
	if p.hasPrefix(lit) {
		p.pos += len(lit)
		return nil
	}
	return p.fail(p.pos, ErrSyntax, "invalid literal, expected "+lit)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.fail(p.pos, ErrTooDeep, fmt.Sprintf("nesting deeper than %d levels", p.maxDepth))
	}
	return nil
}

// closes consumes c, the bracket that closes an object or array, and
// leaves its level of nesting; it reports whether c was there.
func (p *parser) closes(c byte) bool {
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		p.depth--
		return true
	}
	return false
}

// more consumes the ',' before another member or element; it reports
// whether there was one.
func (p *parser) more() bool {
	if p.pos < len(p.data) && p.data[p.pos] == ',' {
		p.pos++
		p.skipSpace()
		return true
	}
	return false
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	var m map[string]any
	if p.scratch != nil {
		m = p.scratch.object()
	} else {
		m = make(map[string]any)
	}
	p.skipSpace()
	if p.closes('}') {
		return m, nil
	}
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.unexpected("a member name")
		}
		nameOff := p.pos
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[name]; dup {
			return nil, p.fail(nameOff, ErrDuplicateName, fmt.Sprintf("duplicate member name %q", name))
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.unexpected("':' after member name")
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, pathSeg{name: name})
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		m[name] = v
		p.skipSpace()
		if p.more() {
			continue
		}
		if p.closes('}') {
			return m, nil
		}
		return nil, p.unexpected("',' or '}' in object")
	}
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	var a []any
	slot := -1
	if p.scratch != nil {
		a, slot = p.scratch.array()
	} else {
		a = make([]any, 0, 4)
	}
	a, err := p.items(a)
	if slot >= 0 {
		// Kept, grown or not, for Reset to empty.
		p.scratch.arrays[slot] = a
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// items appends the items of the array whose '[' has been read to a.
func (p *parser) items(a []any) ([]any, error) {
	p.skipSpace()
	if p.closes(']') {
		return a, nil
	}
	p.path = append(p.path, pathSeg{isIndex: true})
	seg := len(p.path) - 1
	for {
		p.path[seg].index = len(a)
		v, err := p.value()
		if err != nil {
			return a, err
		}
		a = append(a, v)
		p.skipSpace()
		if p.more() {
			continue
		}
		if p.closes(']') {
			p.path = p.path[:seg]
			return a, nil
		}
		return a, p.unexpected("',' or ']' in array")
	}
}

// TypeName names the JSON type of a value of the tree Parse returns, for
// error messages: "null", "a boolean", "a number", "a string", "an array",
// "an object".
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
