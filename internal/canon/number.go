package canon

import (
	"errors"
	"fmt"
	"strconv"
)

// number parses a number per the RFC 8259 grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (p *parser) number() (any, error) {
	start := p.pos
	simple, err := p.scanNumber()
	if err != nil {
		return nil, err
	}
	text := p.data[start:p.pos]
	if simple {
		if f, ok := smallInteger(text); ok {
			return f, nil
		}
	}
	return p.double(start, text)
}

// scanNumber moves p.pos past the number literal starting there, and
// reports whether it is an integer (no fraction, no exponent).
func (p *parser) scanNumber() (simple bool, err error) {
	d := p.data
	start := p.pos
	i := start
	if d[i] == '-' {
		i++
		if i < len(d) && d[i] == 'I' && len(d)-i >= 8 && string(d[i:i+8]) == "Infinity" {
			return false, p.fail(start, ErrSyntax, "-Infinity is not a JSON value")
		}
	}
	if i >= len(d) || d[i] < '0' || d[i] > '9' {
		p.pos = i
		return false, p.unexpected("a digit in number")
	}
	simple = true
	if d[i] == '0' {
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			return false, p.fail(start, ErrSyntax, "leading zero in number")
		}
	} else {
		i = skipDigits(d, i)
	}
	if i < len(d) && d[i] == '.' {
		simple = false
		if i, err = p.digits(i+1, "a digit after the decimal point"); err != nil {
			return false, err
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		simple = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i, err = p.digits(i, "a digit in the exponent"); err != nil {
			return false, err
		}
	}
	p.pos = i
	return simple, nil
}

// digits returns the end of the digits at i, of which there must be one
// at least; without one, it refuses the number, wanting a digit there.
func (p *parser) digits(i int, want string) (int, error) {
	d := p.data
	if i >= len(d) || d[i] < '0' || d[i] > '9' {
		p.pos = i
		return 0, p.unexpected(want)
	}
	return skipDigits(d, i), nil
}

// skipDigits returns the end of the digits at i.
func skipDigits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// smallInteger reads an integer literal of up to 15 digits, which a double
// holds exactly, without strconv; ok is false for a longer one.
func smallInteger(text []byte) (f float64, ok bool) {
	digits := text
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	f = float64(n)
	if text[0] == '-' {
		f = -f
	}
	return f, true
}

// double reads the number literal text, found at start, as a double: one
// out of range is refused, and so, when exact numbers are asked for, is
// one that a double does not hold exactly.
func (p *parser) double(start int, text []byte) (any, error) {
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return nil, p.fail(start, ErrNumberRange,
				fmt.Sprintf("number %s is not a finite IEEE-754 double", shownNumber(text)))
		}
		return nil, p.fail(start, ErrSyntax, fmt.Sprintf("invalid number %s", shownNumber(text)))
	}
	if p.exact && !sameDecimal(text, strconv.AppendFloat(nil, f, 'e', -1, 64)) {
		return nil, p.fail(start, ErrNumberInexact,
			fmt.Sprintf("number %s is not exactly a double (it would be read as %s); write it as that, or as a string",
				shownNumber(text), strconv.FormatFloat(f, 'g', -1, 64)))
	}
	return f, nil
}

// shownNumber is a number literal as an error shows it: cut to 40 bytes.
func shownNumber(text []byte) string {
	shown := string(text)
	if len(shown) > 40 {
		shown = shown[:37] + "..."
	}
	return shown
}

// sameDecimal reports whether two valid JSON number literals (or a literal
// and strconv's 'e' format) denote the same decimal value, treating -0 as 0.
func sameDecimal(a, b []byte) bool {
	na, da, ea := decimalOf(a)
	nb, db, eb := decimalOf(b)
	if len(da) == 0 || len(db) == 0 {
		return len(da) == len(db)
	}
	return na == nb && ea == eb && string(da) == string(db)
}

// decimalOf splits a number literal into its sign, its significant digits
// (no leading or trailing zeros; empty for zero) and the exponent e with
// value = 0.digits × 10^e. An exponent too large for an int saturates.
func decimalOf(s []byte) (neg bool, digits []byte, exp int) {
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	mant, e := s, 0
	for i, c := range s {
		if c == 'e' || c == 'E' {
			mant = s[:i]
			x := s[i+1:]
			sign := 1
			if len(x) > 0 && (x[0] == '+' || x[0] == '-') {
				if x[0] == '-' {
					sign = -1
				}
				x = x[1:]
			}
			for _, d := range x {
				if e < 1<<40 {
					e = e*10 + int(d-'0')
				}
			}
			e *= sign
			break
		}
	}
	intLen := len(mant)
	digits = make([]byte, 0, len(mant))
	for i, c := range mant {
		if c == '.' {
			intLen = i
			continue
		}
		digits = append(digits, c)
	}
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	return neg, digits, e + intLen - lead
}
