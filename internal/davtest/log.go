package davtest

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Entry is one request or answer in a server's log.
type Entry struct {
	// Received is set for a line that shows a request as received.
	Received bool
	// Status is the answer's status code, 0 for a line that shows none.
	Status int
	Method string
	// Path is the URL path, percent-decoded.
	Path string
}

var (
	pyString = `('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")`
	// [...] [INFO] PUT request for '/a/b.ics' received from 127.0.0.1 using '...'
	radicaleRequest = regexp.MustCompile(`\[INFO\] ([A-Z]+) request for ` + pyString + `(?: with depth ` + pyString + `)? received from `)
	// [...] [INFO] PUT response status for '/a/b.ics' in 0.004 seconds: 201 Created
	radicaleAnswer = regexp.MustCompile(`\[INFO\] ([A-Z]+) response status for ` + pyString + `(?: with depth ` + pyString + `)? in [0-9.]+ seconds: ([0-9]{3})\b`)
	// INFO:aiohttp.access:127.0.0.1 [30/Nov/2026:23:58:28 +0000] "PUT /a/b.ics HTTP/1.1" 201 205 "-" "..."
	aiohttpAccess = regexp.MustCompile(`aiohttp\.access:\S* \[[^\]]*\] "([A-Z]+) (\S+) HTTP/[0-9.]+" ([0-9]{3}) `)
)

// ParseLog reads the entries of a server's log, in order.
func ParseLog(k Kind, log []byte) []Entry {
	var out []Entry
	for _, line := range strings.Split(string(log), "\n") {
		switch k {
		case Radicale:
			if m := radicaleRequest.FindStringSubmatch(line); m != nil {
				out = append(out, Entry{Received: true, Method: m[1], Path: pyUnquote(m[2])})
			} else if m := radicaleAnswer.FindStringSubmatch(line); m != nil {
				code, _ := strconv.Atoi(m[4])
				out = append(out, Entry{Status: code, Method: m[1], Path: pyUnquote(m[2])})
			}
		case Xandikos:
			if m := aiohttpAccess.FindStringSubmatch(line); m != nil {
				code, _ := strconv.Atoi(m[3])
				out = append(out, Entry{Received: true, Status: code, Method: m[1], Path: decodePath(m[2])})
			}
		}
	}
	return out
}

// decodePath percent-decodes the path of a request target; a target that
// does not decode is kept as it is.
func decodePath(target string) string {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	p, err := url.PathUnescape(target)
	if err != nil {
		return target
	}
	return p
}

// pyUnquote decodes a Python string literal as repr() writes it.
func pyUnquote(q string) string {
	if len(q) < 2 {
		return q
	}
	s := q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+n <= len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil {
					b.WriteRune(rune(v))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		default:
			b.WriteByte(e)
		}
	}
	if !utf8.ValidString(b.String()) {
		return s
	}
	return b.String()
}
