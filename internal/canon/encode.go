package canon

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Encode writes the canonical (JCS, RFC 8785) form of a value tree as produced
// by Parse: nil, bool, float64, string, []any and map[string]any. Object
// members are sorted by their names as UTF-16 code units, recursively; arrays
// keep their order; numbers are written as ECMAScript's Number.prototype.toString
// writes them; strings are escaped as RFC 8785 requires (\" \\ \b \f \n \r \t,
// \u00xx with lower-case hex for other control characters, everything else
// literal UTF-8).
//
// Encode refuses, with an *Error whose Offset is -1: other types
// (ErrUnsupportedType), NaN and ±Inf (ErrNumberRange), strings and member
// names that are not valid UTF-8 (ErrInvalidUTF8), and nesting deeper than
// 10,000 levels (ErrTooDeep).
func Encode(v any) ([]byte, error) {
	return encode(v, 256)
}

// encode is Encode with a hint of the output size.
func encode(v any, sizeHint int) ([]byte, error) {
	e := encoder{buf: make([]byte, 0, sizeHint), names: make([]string, 0, 32)}
	if err := e.value(v); err != nil {
		return nil, err
	}
	return e.buf, nil
}

type encoder struct {
	buf   []byte
	depth int
	path  []pathSeg
	// names is a stack of member names shared by all objects being written:
	// each object sorts its names in its own segment at the top.
	names []string
	// omitting leaves the member named omit of the outermost object out.
	omitting bool
	omit     string
}

func (e *encoder) fail(sentinel error, reason string) *Error {
	return &Error{Offset: -1, Path: formatPath(e.path), Reason: reason, Err: sentinel}
}

func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		if x {
			e.buf = append(e.buf, "true"...)
		} else {
			e.buf = append(e.buf, "false"...)
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return e.fail(ErrNumberRange, fmt.Sprintf("number %v is not a finite IEEE-754 double", x))
		}
		e.buf, _ = AppendNumber(e.buf, x)
	case string:
		var ok bool
		if e.buf, ok = appendString(e.buf, x); !ok {
			return e.fail(ErrInvalidUTF8, "string is not valid UTF-8")
		}
	case []any:
		if err := e.enter(); err != nil {
			return err
		}
		e.buf = append(e.buf, '[')
		e.path = append(e.path, pathSeg{isIndex: true})
		seg := len(e.path) - 1
		for i, el := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.path[seg].index = i
			if err := e.value(el); err != nil {
				return err
			}
		}
		e.path = e.path[:seg]
		e.buf = append(e.buf, ']')
		e.depth--
	case map[string]any:
		if err := e.enter(); err != nil {
			return err
		}
		base := len(e.names)
		skip := e.omitting && e.depth == 1
		for name := range x {
			if skip && name == e.omit {
				continue
			}
			e.names = append(e.names, name)
		}
		n := len(e.names) - base
		slices.SortFunc(e.names[base:], compareUTF16)
		e.buf = append(e.buf, '{')
		for i := range n {
			// Index e.names afresh: nested objects may grow it.
			name := e.names[base+i]
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			var ok bool
			if e.buf, ok = appendString(e.buf, name); !ok {
				return e.fail(ErrInvalidUTF8, "member name is not valid UTF-8")
			}
			e.buf = append(e.buf, ':')
			e.path = append(e.path, pathSeg{name: name})
			if err := e.value(x[name]); err != nil {
				return err
			}
			e.path = e.path[:len(e.path)-1]
		}
		clear(e.names[base:])
		e.names = e.names[:base]
		e.buf = append(e.buf, '}')
		e.depth--
	default:
		return e.fail(ErrUnsupportedType, fmt.Sprintf("value of type %T is not supported", v))
	}
	return nil
}

func (e *encoder) enter() error {
	e.depth++
	if e.depth > maxNesting {
		return e.fail(ErrTooDeep, fmt.Sprintf("nesting deeper than %d levels", maxNesting))
	}
	return nil
}

// compareUTF16 orders two valid UTF-8 strings as RFC 8785 requires: by their
// UTF-16 code units. It does not allocate.
//
// Byte order of UTF-8 is code point order, and code point order equals UTF-16
// order except between supplementary characters (U+10000 and above, encoded as
// surrogates U+D800..U+DBFF in UTF-16) and BMP characters U+E000..U+FFFF: in
// UTF-16 the supplementary character comes first. At the first byte where the
// strings differ both strings are either at the start of a character (the
// prefix before it is shared) or inside characters of the same length, so
// looking at that byte alone is enough: lead bytes 0xEE and 0xEF start
// U+E000..U+FFFF, lead bytes 0xF0 and above start supplementary characters.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	x, y := a[i], b[i]
	if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
		if x >= 0xF0 {
			return -1
		}
		return 1
	}
	return int(x) - int(y)
}

const hexDigits = "0123456789abcdef"

// escapeByte holds, for each ASCII byte, 0 if it is written as it is, the
// letter of its two-character escape, or 'u' for \u00xx.
var escapeByte = func() (t [utf8.RuneSelf]byte) {
	for c := range 0x20 {
		t[c] = 'u'
	}
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = 'b', 'f', 'n', 'r', 't'
	t['"'], t['\\'] = '"', '\\'
	return t
}()

// appendString appends s as a JCS string. It reports false if s is not valid
// UTF-8.
func appendString(dst []byte, s string) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = plainEnd(s, i); i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			esc := escapeByte[c]
			if esc == 0 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if esc == 'u' {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				dst = append(dst, '\\', esc)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return dst, false
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// AppendNumber appends the ECMAScript (ES6) serialisation of f, as
// Number.prototype.toString writes it, which is what RFC 8785 prescribes. It
// returns an error wrapping ErrNumberRange for NaN and ±Inf. -0 is written as
// "0".
func AppendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, &Error{Offset: -1, Reason: fmt.Sprintf("number %v is not a finite IEEE-754 double", f), Err: ErrNumberRange}
	}
	if f == 0 {
		return append(dst, '0'), nil
	}
	// Integers below 2^53 are exact and their shortest form is all their
	// digits, which is what ES6 writes for magnitudes below 1e21.
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(dst, int64(f), 10), nil
	}

	// Shortest round-trip digits in the form d.ddddde±XX.
	var tmp [32]byte
	b := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	if b[0] == '-' {
		dst = append(dst, '-')
		b = b[1:]
	}
	ei := 0
	for b[ei] != 'e' {
		ei++
	}
	var digits [24]byte
	digits[0] = b[0]
	k := 1
	if ei > 1 { // b[1] is '.'
		k += copy(digits[1:], b[2:ei])
	}
	exp := 0
	for _, c := range b[ei+2:] {
		exp = exp*10 + int(c-'0')
	}
	if b[ei+1] == '-' {
		exp = -exp
	}
	// ES6 terms: the value is 0.d1d2...dk × 10^n.
	n := exp + 1
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
		}
		e := n - 1
		if e < 0 {
			e = -e
		}
		dst = strconv.AppendInt(dst, int64(e), 10)
	}
	return dst, nil
}
