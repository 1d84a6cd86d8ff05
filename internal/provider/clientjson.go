package provider

import "encoding/json"

// A create call's body is encoded by hand, without reflection: the bytes
// are those encoding/json writes for the same CreateRequest (tests compare
// the two over every field, and the request document over any input), so
// the service reads the call as before. The request document, a raw JSON
// member, is compacted and its '<', '>', '&', U+2028 and U+2029 escaped as
// encoding/json does; a document this encoder does not take (not JSON, or
// nested deeper than maxCompactDepth) leaves the whole body to
// encoding/json, which reports or encodes it as it always did.

// maxCompactDepth bounds the nesting that compactJSON takes; deeper
// documents go to encoding/json.
const maxCompactDepth = 64

// encodeCreateRequest returns the body of a create call.
func encodeCreateRequest(r *CreateRequest) ([]byte, error) {
	if b, ok := r.appendJSON(make([]byte, 0, r.sizeHint())); ok {
		return b, nil
	}
	return json.Marshal(r)
}

// sizeHint bounds the length of r's body when nothing in it is escaped:
// every member's name and punctuation (createRequestFrame), omitted or
// not, and the values.
func (r *CreateRequest) sizeHint() int {
	n := createRequestFrame + len(r.Scope) + len(r.IntentID) + len(r.RequestDigest) + len(r.RequestID) +
		len(r.Task.Title) + len(r.CallRef) + len(r.NotAfter)
	if r.Request != nil {
		n += len(r.Request) - len("null")
	}
	for _, p := range []*string{r.Task.AssigneePersonRef, r.Task.DueAt} {
		if p != nil {
			n += len(*p) + 2 - len("null") // quoted in place of null
		}
	}
	return n
}

// createRequestFrame is the length of a create call's body with every
// member present and every string empty.
const createRequestFrame = len(`{"scope":"","intent_id":"","request_digest":"","request_id":"","task":{"title":"",` +
	`"assignee_person_ref":null,"due_at":null},"request":null,"call_ref":"","not_after":""}`)

// appendJSON appends r as encoding/json writes it, and reports whether it
// could: false when r.Request is not a document compactJSON takes.
func (r *CreateRequest) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, '{')
	if r.Scope != "" {
		b = append(appendJSONString(append(b, `"scope":`...), r.Scope), ',')
	}
	b = appendJSONString(append(b, `"intent_id":`...), r.IntentID)
	b = appendJSONString(append(b, `,"request_digest":`...), r.RequestDigest)
	b = appendOmitEmpty(b, `,"request_id":`, r.RequestID)
	b = appendJSONString(append(b, `,"task":{"title":`...), r.Task.Title)
	b = appendNullable(append(b, `,"assignee_person_ref":`...), r.Task.AssigneePersonRef)
	b = appendNullable(append(b, `,"due_at":`...), r.Task.DueAt)
	b = append(b, `},"request":`...)
	if r.Request == nil {
		b = append(b, "null"...)
	} else {
		c := compactor{src: r.Request, out: b}
		if !c.document() {
			return b, false
		}
		b = c.out
	}
	b = appendOmitEmpty(b, `,"call_ref":`, r.CallRef)
	b = appendOmitEmpty(b, `,"not_after":`, r.NotAfter)
	return append(b, '}'), true
}

// compactor copies one JSON document from src to out as encoding/json
// compacts a json.RawMessage: without the white space between tokens,
// with '<', '>', '&', U+2028 and U+2029 escaped, everything else as it
// is (strings are not checked for UTF-8, as encoding/json does not).
type compactor struct {
	src   []byte
	pos   int
	out   []byte
	depth int
}

// document copies src, which must be exactly one JSON value with white
// space around it at most, and reports whether it was.
func (c *compactor) document() bool {
	if !c.value() {
		return false
	}
	c.space()
	return c.pos == len(c.src)
}

// space skips the white space JSON allows between tokens.
func (c *compactor) space() {
	for c.pos < len(c.src) && jsonSpace(c.src[c.pos]) {
		c.pos++
	}
}

func jsonSpace(ch byte) bool { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' }

func (c *compactor) value() bool {
	c.space()
	if c.pos >= len(c.src) {
		return false
	}
	switch ch := c.src[c.pos]; {
	case ch == '{':
		return c.container('}')
	case ch == '[':
		return c.container(']')
	case ch == '"':
		return c.str()
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return false
}

// container copies an object (closed by '}') or an array (']').
func (c *compactor) container(closer byte) bool {
	if c.depth++; c.depth > maxCompactDepth {
		return false
	}
	c.out = append(c.out, c.src[c.pos])
	c.pos++
	c.space()
	if c.pos < len(c.src) && c.src[c.pos] == closer {
		c.out = append(c.out, closer)
		c.pos++
		c.depth--
		return true
	}
	for {
		if closer == '}' {
			c.space()
			if c.pos >= len(c.src) || c.src[c.pos] != '"' || !c.str() || !c.punct(':') {
				return false
			}
		}
		if !c.value() {
			return false
		}
		c.space()
		if c.pos >= len(c.src) {
			return false
		}
		switch c.src[c.pos] {
		case ',':
			c.out = append(c.out, ',')
			c.pos++
		case closer:
			c.out = append(c.out, closer)
			c.pos++
			c.depth--
			return true
		default:
			return false
		}
	}
}

// punct copies p, after white space.
func (c *compactor) punct(p byte) bool {
	c.space()
	if c.pos >= len(c.src) || c.src[c.pos] != p {
		return false
	}
	c.out = append(c.out, p)
	c.pos++
	return true
}

func (c *compactor) literal(lit string) bool {
	if len(c.src)-c.pos < len(lit) || string(c.src[c.pos:c.pos+len(lit)]) != lit {
		return false
	}
	c.out = append(c.out, lit...)
	c.pos += len(lit)
	return true
}

// number copies a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *compactor) number() bool {
	start, i := c.pos, c.pos
	if c.src[i] == '-' {
		i++
	}
	switch {
	case i < len(c.src) && c.src[i] == '0':
		i++
	case i < len(c.src) && c.src[i] >= '1' && c.src[i] <= '9':
		i = skipDigits(c.src, i)
	default:
		return false
	}
	if i < len(c.src) && c.src[i] == '.' {
		if j := skipDigits(c.src, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(c.src) && (c.src[i] == 'e' || c.src[i] == 'E') {
		i++
		if i < len(c.src) && (c.src[i] == '+' || c.src[i] == '-') {
			i++
		}
		if j := skipDigits(c.src, i); j > i {
			i = j
		} else {
			return false
		}
	}
	c.out = append(c.out, c.src[start:i]...)
	c.pos = i
	return true
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// str copies a string, escaping what encoding/json escapes in a raw
// message; control characters and unknown escapes are not JSON.
func (c *compactor) str() bool {
	src := c.src
	start := c.pos
	for i := c.pos + 1; i < len(src); i++ {
		ch := src[i]
		if !stringSpecial[ch] {
			continue
		}
		switch {
		case ch == '"':
			c.out = append(c.out, src[start:i+1]...)
			c.pos = i + 1
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			n := escapeLen(src, i)
			if n == 0 {
				return false
			}
			i += n - 1
		case ch == '<' || ch == '>' || ch == '&':
			c.out = append(append(c.out, src[start:i]...), '\\', 'u', '0', '0', jsonHex[ch>>4], jsonHex[ch&0xF])
			start = i + 1
		case ch == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			c.out = append(append(c.out, src[start:i]...), '\\', 'u', '2', '0', '2', jsonHex[src[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return false
}

// stringSpecial marks the bytes str must look at: the end of the string,
// escapes, control characters, what it escapes and the first byte of
// U+2028 and U+2029.
var stringSpecial = func() (t [256]bool) {
	for ch := range 0x20 {
		t[ch] = true
	}
	for _, ch := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[ch] = true
	}
	return t
}()

// escapeLen is the length of the escape at src[i] ('\\'), 0 when it is
// not one JSON knows.
func escapeLen(src []byte, i int) int {
	if i+1 >= len(src) {
		return 0
	}
	switch src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+5 >= len(src) {
			return 0
		}
		for _, h := range src[i+2 : i+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return 0
			}
		}
		return 6
	}
	return 0
}
