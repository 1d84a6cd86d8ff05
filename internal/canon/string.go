package canon

import (
	"fmt"
	"unicode/utf8"
)

// plainByte marks the bytes that a string can hold as they are: printable
// ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str parses the string starting at the '"' at p.pos.
func (p *parser) str() (string, error) {
	d := p.data
	start := p.pos + 1
	i := start
	for i < len(d) {
		if i = plainEnd(d, i); i == len(d) {
			break
		}
		c := d[i]
		switch c {
		case '"':
			p.pos = i + 1
			return p.src[start:i], nil
		case '\\':
			return p.strEscaped(start, i)
		default:
			size, err := p.charSize(i)
			if err != nil {
				return "", err
			}
			i += size
		}
	}
	return "", p.fail(p.pos, ErrSyntax, "unterminated string")
}

// strEscaped continues parsing a string whose content starts at start and
// whose first backslash is at i.
func (p *parser) strEscaped(start, i int) (string, error) {
	d := p.data
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, d[start:i]...)
	for i < len(d) {
		c := d[i]
		if plainByte[c] {
			buf = append(buf, c)
			i++
			continue
		}
		switch c {
		case '"':
			p.pos = i + 1
			return string(buf), nil
		case '\\':
			if i+1 >= len(d) {
				i++
				continue // reported as unterminated below
			}
			switch e := d[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d, i+2)
				if !ok {
					return "", p.fail(i, ErrSyntax, "invalid \\u escape: expected 4 hexadecimal digits")
				}
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", p.fail(i, ErrLoneSurrogate,
						fmt.Sprintf("lone low surrogate \\u%04x in string", r))
				case r >= 0xD800 && r <= 0xDBFF:
					lo, ok := rune(0), false
					if i+7 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
						lo, ok = hex4(d, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "", p.fail(i, ErrLoneSurrogate,
							fmt.Sprintf("lone high surrogate \\u%04x in string", r))
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
				buf = utf8.AppendRune(buf, r)
				i += 4
			default:
				if e < utf8.RuneSelf && e >= 0x20 {
					return "", p.fail(i, ErrSyntax, fmt.Sprintf("invalid escape \\%c in string", e))
				}
				return "", p.fail(i, ErrSyntax, "invalid escape in string")
			}
			i += 2
		default:
			size, err := p.charSize(i)
			if err != nil {
				return "", err
			}
			buf = append(buf, d[i:i+size]...)
			i += size
		}
	}
	return "", p.fail(p.pos, ErrSyntax, "unterminated string")
}

// charSize returns the size of the character at i in a string, one that is
// not a plain byte, a quote or a backslash: it refuses a control character
// and a byte that starts no UTF-8 encoded character.
func (p *parser) charSize(i int) (int, error) {
	c := p.data[i]
	if c < 0x20 {
		return 0, p.fail(i, ErrSyntax, fmt.Sprintf("unescaped control character U+%04X in string", c))
	}
	r, size := utf8.DecodeRune(p.data[i:])
	if r == utf8.RuneError && size <= 1 {
		return 0, p.fail(i, ErrInvalidUTF8, fmt.Sprintf("invalid UTF-8 byte 0x%02x in string", c))
	}
	return size, nil
}

// hex4 decodes the four hexadecimal digits at d[i:i+4].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
