package canon

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

const vectorDir = "testdata/jcs"

func TestVectors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(vectorDir, "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 6 {
		t.Fatalf("found %d input vectors, want 6", len(inputs))
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run("canonicalizes "+name+" to the expected bytes", func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(vectorDir, "output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(src)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("canonical form is not stable: %q, %v", again, err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse([]byte(tc.in), DefaultLimits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%.60q) = %v, %v; want %v", tc.in, v, err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *canon.Error", err)
			}
			if e.Offset < 0 || e.Offset > len(tc.in) {
				t.Errorf("offset %d outside the input of %d bytes", e.Offset, len(tc.in))
			}
			if !strings.HasPrefix(e.Path, "$") {
				t.Errorf("path %q does not start with $", e.Path)
			}
			if !strings.HasPrefix(err.Error(), "canon: ") {
				t.Errorf("message %q lacks the package prefix", err)
			}
			if _, err := Canonicalize([]byte(tc.in)); !errors.Is(err, tc.want) {
				t.Errorf("Canonicalize: %v, want %v", err, tc.want)
			}
			if _, err := Digest([]byte(tc.in)); !errors.Is(err, tc.want) {
				t.Errorf("Digest: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("refuses nil input as empty", func(t *testing.T) {
		if _, err := Parse(nil, DefaultLimits); !errors.Is(err, ErrEmpty) {
			t.Fatalf("err = %v, want ErrEmpty", err)
		}
	})
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range acceptances {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%.60q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("produces the documented Go types", func(t *testing.T) {
		v, err := Parse([]byte(`{"a":[1.5,"s",true,null,{}]}`), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"a": []any{1.5, "s", true, nil, map[string]any{}}}
		if !reflect.DeepEqual(v, want) {
			t.Errorf("got %#v, want %#v", v, want)
		}
	})
}

func TestErrorDetails(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   error
		offset int
		path   string
		msg    string
	}{
		{
			name: "names the object and the member of a duplicate name",
			in:   `{"request":{"task":{"title":"x","a":1,"a":2}}}`,
			want: ErrDuplicateName, offset: 38, path: "$.request.task",
			msg: `canon: duplicate member name "a" at $.request.task (offset 38)`,
		},
		{
			name: "gives the path of a lone surrogate inside an array",
			in:   `{"evidence":[{"quote":"ok"},{"quote":"\ud800"}]}`,
			want: ErrLoneSurrogate, offset: 38, path: "$.evidence[1].quote",
			msg: `canon: lone high surrogate \ud800 in string at $.evidence[1].quote (offset 38)`,
		},
		{
			name: "gives the path and offset of an out-of-range number",
			in:   `{"n":[0,1e400]}`,
			want: ErrNumberRange, offset: 8, path: "$.n[1]",
			msg: `canon: number 1e400 is not a finite IEEE-754 double at $.n[1] (offset 8)`,
		},
		{
			name: "gives the offset of trailing data",
			in:   `{"a":1} x`,
			want: ErrTrailingData, offset: 8, path: "$",
			msg: `canon: data after the JSON value: character 'x' at $ (offset 8)`,
		},
		{
			name: "gives the offset of invalid UTF-8",
			in:   "[\"ok\",\"a\xff\"]",
			want: ErrInvalidUTF8, offset: 8, path: "$[1]",
			msg: `canon: invalid UTF-8 byte 0xff in string at $[1] (offset 8)`,
		},
		{
			name: "gives the path of the container that is too deep",
			in:   `{"a":[[1]]}`,
			want: ErrTooDeep, offset: 6, path: "$.a[0]",
			msg: `canon: nesting deeper than 2 levels at $.a[0] (offset 6)`,
		},
		{
			name: "reports a byte order mark as such",
			in:   "\xef\xbb\xbf{}",
			want: ErrSyntax, offset: 0, path: "$",
			msg: `canon: byte order mark is not allowed at $ (offset 0)`,
		},
		{
			name: "reports a leading zero as such",
			in:   `{"n":01}`,
			want: ErrSyntax, offset: 5, path: "$.n",
			msg: `canon: leading zero in number at $.n (offset 5)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lim := DefaultLimits
			if errors.Is(tc.want, ErrTooDeep) {
				lim.MaxDepth = 2
			}
			_, err := Parse([]byte(tc.in), lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *canon.Error", err)
			}
			if e.Offset != tc.offset || e.Path != tc.path || !errors.Is(e.Unwrap(), tc.want) {
				t.Errorf("got offset %d path %q sentinel %v; want %d %q %v",
					e.Offset, e.Path, e.Unwrap(), tc.offset, tc.path, tc.want)
			}
			if err.Error() != tc.msg {
				t.Errorf("message\n got %s\nwant %s", err, tc.msg)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	t.Run("accepts input of exactly MaxBytes", func(t *testing.T) {
		if _, err := Parse([]byte(`[1,2]`), Limits{MaxBytes: 5}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("refuses input one byte over MaxBytes", func(t *testing.T) {
		_, err := Parse([]byte(`[1,2] `), Limits{MaxBytes: 5})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("accepts input of exactly 1 MiB by default", func(t *testing.T) {
		doc := `"` + strings.Repeat("a", 1<<20-2) + `"`
		if _, err := Parse([]byte(doc), Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("accepts nesting of exactly MaxDepth", func(t *testing.T) {
		if _, err := Parse([]byte(`[{"a":[]}]`), Limits{MaxDepth: 3}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("refuses nesting one over MaxDepth", func(t *testing.T) {
		_, err := Parse([]byte(`[{"a":[[]]}]`), Limits{MaxDepth: 3})
		if !errors.Is(err, ErrTooDeep) {
			t.Fatalf("err = %v, want ErrTooDeep", err)
		}
	})
	t.Run("uses the defaults for zero and negative limits", func(t *testing.T) {
		deep := []byte(strings.Repeat("[", 65) + strings.Repeat("]", 65))
		for _, lim := range []Limits{{}, {MaxBytes: -1, MaxDepth: -1}} {
			if _, err := Parse(deep, lim); !errors.Is(err, ErrTooDeep) {
				t.Errorf("%+v: err = %v, want ErrTooDeep", lim, err)
			}
		}
	})
	t.Run("caps MaxDepth at 10000", func(t *testing.T) {
		n := maxNesting + 1
		deep := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if _, err := Parse(deep, Limits{MaxDepth: 1 << 30}); !errors.Is(err, ErrTooDeep) {
			t.Errorf("err = %v, want ErrTooDeep", err)
		}
		if _, err := Parse(deep[1:len(deep)-1], Limits{MaxDepth: 1 << 30}); err != nil {
			t.Errorf("nesting of exactly 10000: %v", err)
		}
	})
}

func TestParseNeverPanicsOnTruncatedInput(t *testing.T) {
	var docs []string
	inputs, _ := filepath.Glob(filepath.Join(vectorDir, "input", "*.json"))
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, r := range refusals {
		if len(r.in) <= 4096 {
			docs = append(docs, r.in)
		}
	}
	for _, a := range acceptances {
		docs = append(docs, a.in)
	}
	for _, doc := range docs {
		for i := range len(doc) + 1 {
			for _, in := range []string{doc[:i], doc[i:]} {
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("Parse(%q) panicked: %v", in, p)
						}
					}()
					if v, err := Parse([]byte(in), DefaultLimits); err == nil {
						if _, err := Encode(v); err != nil {
							t.Errorf("Encode after Parse(%q): %v", in, err)
						}
					}
				}()
			}
		}
	}
}

func TestEncode(t *testing.T) {
	t.Run("writes a value tree built in Go", func(t *testing.T) {
		v := map[string]any{
			"b": []any{1.0, -0.5, "x\u2028\x01", nil},
			"a": map[string]any{"z": true, "y": false},
		}
		got, err := Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		const want = `{"a":{"y":false,"z":true},"b":[1,-0.5,"x` + "\u2028" + `\u0001",null]}`
		if string(got) != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := []struct {
		name string
		in   any
		want error
		path string
	}{
		{"refuses an int", 1, ErrUnsupportedType, "$"},
		{"refuses a float32", float32(1), ErrUnsupportedType, "$"},
		{"refuses a []string", []string{"a"}, ErrUnsupportedType, "$"},
		{"refuses a map[string]string", map[string]string{"a": "b"}, ErrUnsupportedType, "$"},
		{"refuses a struct inside an array", []any{struct{}{}}, ErrUnsupportedType, "$[0]"},
		{"refuses NaN", math.NaN(), ErrNumberRange, "$"},
		{"refuses +Inf inside an object", map[string]any{"a": []any{0.0, math.Inf(1)}}, ErrNumberRange, "$.a[1]"},
		{"refuses -Inf", math.Inf(-1), ErrNumberRange, "$"},
		{"refuses a string that is not UTF-8", "a\xffb", ErrInvalidUTF8, "$"},
		{"refuses a member name that is not UTF-8", map[string]any{"\xc3": 1.0}, ErrInvalidUTF8, "$"},
		{"refuses a cyclic value", cyclic, ErrTooDeep, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Encode(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Encode = %q, %v; want %v", out, err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *canon.Error", err)
			}
			if e.Offset != -1 {
				t.Errorf("offset %d, want -1", e.Offset)
			}
			if tc.path != "" && e.Path != tc.path {
				t.Errorf("path %q, want %q", e.Path, tc.path)
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	reference := func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	}
	sign := func(n int) int { return min(max(n, -1), 1) }
	tests := []struct {
		name string
		a, b string
	}{
		{"orders ASCII by byte", "a", "b"},
		{"orders a prefix first", "ab", "abc"},
		{"orders equal strings as equal", "é", "é"},
		{"orders an emoji before U+E000", "\U0001F602", "\uE000"},
		{"orders an emoji before U+FFFF", "\U0001F602", "\uFFFF"},
		{"orders an emoji after U+D7FF", "\U0001F602", "\uD7FF"},
		{"orders U+FB33 after an emoji", "\uFB33", "\U0001F602"},
		{"orders U+10000 before U+10FFFF", "\U00010000", "\U0010FFFF"},
		{"orders U+0080 before U+00F6", "\u0080", "\u00f6"},
		{"orders by the first differing character only", "x\U0001F602a", "x\uE000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
				if got, want := sign(compareUTF16(p[0], p[1])), reference(p[0], p[1]); got != want {
					t.Errorf("compareUTF16(%q, %q) = %d, want %d", p[0], p[1], got, want)
				}
			}
		})
	}
	t.Run("agrees with UTF-16 on random strings", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		pool := []rune{'a', 'b', 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f602, 0x10ffff}
		gen := func() string {
			rs := make([]rune, r.IntN(4))
			for i := range rs {
				rs[i] = pool[r.IntN(len(pool))]
			}
			return string(rs)
		}
		for range 20000 {
			a, b := gen(), gen()
			if got, want := sign(compareUTF16(a, b)), reference(a, b); got != want {
				t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	})
	t.Run("does not allocate", func(t *testing.T) {
		a, b := "name\uE000", "name\U0001F602"
		if n := testing.AllocsPerRun(100, func() { compareUTF16(a, b) }); n != 0 {
			t.Errorf("%v allocations per comparison", n)
		}
	})
}

func TestDigest(t *testing.T) {
	t.Run("gives the SHA-256 of the canonical form", func(t *testing.T) {
		got, err := Digest([]byte(" { } "))
		if err != nil {
			t.Fatal(err)
		}
		// SHA-256 of the two bytes "{}".
		const want = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	t.Run("ignores member order and white space", func(t *testing.T) {
		a, errA := Digest([]byte(`{"title":"Call the plumber","due_at":null,"tags":["home","urgent"],"n":1.50}`))
		b, errB := Digest([]byte("{\n  \"n\": 15e-1,\n  \"tags\": [ \"home\", \"urgent\" ],\n  \"due_at\": null,\n  \"title\": \"Call the \\u0070lumber\"\n}\n"))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if a != b {
			t.Errorf("digests differ: %s vs %s", a, b)
		}
	})
	t.Run("changes when content changes", func(t *testing.T) {
		docs := []string{
			`{"a":1}`, `{"a":2}`, `{"b":1}`, `{"a":"1"}`, `{"a":[1]}`, `[1,2]`, `[2,1]`,
			`{"a":null}`, `{}`, `{"a":true}`, `"a"`, `"A"`, `"\u00c5"`, `"A\u030a"`,
		}
		seen := map[string]string{}
		for _, d := range docs {
			dg, err := Digest([]byte(d))
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[dg]; ok {
				t.Errorf("%s and %s have the same digest", prev, d)
			}
			seen[dg] = d
		}
	})
	t.Run("gives the same digest for a shuffled nested document", func(t *testing.T) {
		src, err := os.ReadFile(filepath.Join(vectorDir, "input", "weird.json"))
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"request":{"task":{"title":"Réunion – équipe 🚀","assignee_person_ref":null,"due_at":"2025-01-31T09:00:00Z"},` +
			`"evidence":[{"quote":"«Bonjour» \"chef\"\n","at":12.5e3},{"quote":"\u0000\u001f\u007f","at":-0.000001}],` +
			`"flags":{"b":true,"a":false,"":[[],{},[{"z":1e21,"y":1e-7,"x":123456789012345678}]]}},` +
			`"weird":` + string(src) + `}`
		want, err := Digest([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := Parse([]byte(doc), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 11))
		for i := range 200 {
			var buf bytes.Buffer
			writeShuffled(&buf, tree, r)
			got, err := Digest(buf.Bytes())
			if err != nil {
				t.Fatalf("shuffle %d: %v\n%s", i, err, buf.Bytes())
			}
			if got != want {
				t.Fatalf("shuffle %d: digest %s, want %s\n%s", i, got, want, buf.Bytes())
			}
		}
	})
}

// writeShuffled writes v as JSON with members in random order, random white
// space, randomly escaped characters and randomly chosen number forms.
func writeShuffled(buf *bytes.Buffer, v any, r *rand.Rand) {
	ws := func() {
		for range r.IntN(3) {
			buf.WriteByte(" \t\r\n"[r.IntN(4)])
		}
	}
	ws()
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case float64:
		formats := []byte{'g', 'e', 'E', 'f'}
		s := strconv.FormatFloat(x, formats[r.IntN(len(formats))], -1, 64)
		buf.WriteString(s)
	case string:
		writeShuffledString(buf, x, r)
	case []any:
		buf.WriteByte('[')
		for i, el := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeShuffled(buf, el, r)
		}
		ws()
		buf.WriteByte(']')
	case map[string]any:
		names := make([]string, 0, len(x))
		for n := range x {
			names = append(names, n)
		}
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		buf.WriteByte('{')
		for i, n := range names {
			if i > 0 {
				buf.WriteByte(',')
			}
			ws()
			writeShuffledString(buf, n, r)
			ws()
			buf.WriteByte(':')
			writeShuffled(buf, x[n], r)
		}
		ws()
		buf.WriteByte('}')
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
	ws()
}

func writeShuffledString(buf *bytes.Buffer, s string, r *rand.Rand) {
	buf.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			buf.WriteByte('\\')
			buf.WriteRune(c)
		case c < 0x20 || r.IntN(3) == 0:
			for _, u := range utf16.Encode([]rune{c}) {
				if r.IntN(2) == 0 {
					fmt.Fprintf(buf, `\u%04x`, u)
				} else {
					fmt.Fprintf(buf, `\u%04X`, u)
				}
			}
		case c == '/' && r.IntN(2) == 0:
			buf.WriteString(`\/`)
		default:
			buf.WriteRune(c)
		}
	}
	buf.WriteByte('"')
}

func TestDigestValue(t *testing.T) {
	type task struct {
		Title    string   `json:"title"`
		Assignee *string  `json:"assignee_person_ref"`
		DueAt    *string  `json:"due_at"`
		Tags     []string `json:"tags,omitempty"`
		Weight   float64  `json:"weight"`
	}
	type request struct {
		IntentID string `json:"intent_id"`
		Task     task   `json:"task"`
		Note     string `json:"note"`
	}
	v := request{
		IntentID: "int_01",
		Task:     task{Title: "Réunion <équipe> & 🚀", Tags: []string{"b", "a"}, Weight: 0.1},
		Note:     "line\nbreak",
	}
	t.Run("equals Digest of the struct's JSON", func(t *testing.T) {
		got, err := DigestValue(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Digest([]byte(`{"note":"line\nbreak","intent_id":"int_01","task":{"weight":0.1,"tags":["b","a"],` +
			`"due_at":null,"assignee_person_ref":null,"title":"Réunion <équipe> & 🚀"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	t.Run("equals Digest of the value tree's canonical form", func(t *testing.T) {
		got, err := DigestValue(map[string]any{"b": []any{1.0, "x"}, "a": nil})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Digest([]byte(`{"a":null,"b":[1,"x"]}`))
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	for _, bad := range []struct {
		name string
		v    any
	}{
		{"refuses NaN", math.NaN()},
		{"refuses a channel", make(chan int)},
		{"refuses a function", func() {}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := DigestValue(bad.v); !errors.Is(err, ErrUnsupportedType) {
				t.Errorf("err = %v, want ErrUnsupportedType", err)
			}
		})
	}
}

func TestValidDigest(t *testing.T) {
	valid := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"accepts sha256: and 64 lower-case hex digits", valid, true},
		{"accepts a digest computed by Digest", mustDigest(t, `{"a":1}`), true},
		{"refuses the empty string", "", false},
		{"refuses the prefix alone", "sha256:", false},
		{"refuses upper-case hex", "sha256:" + strings.Repeat("0123456789ABCDEF", 4), false},
		{"refuses an upper-case prefix", "SHA256:" + valid[7:], false},
		{"refuses a missing prefix", valid[7:], false},
		{"refuses another algorithm", "sha512:" + valid[7:], false},
		{"refuses 63 hex digits", valid[:len(valid)-1], false},
		{"refuses 65 hex digits", valid + "0", false},
		{"refuses a non-hex letter", valid[:len(valid)-1] + "g", false},
		{"refuses a trailing newline", valid[:len(valid)-1] + "\n", false},
		{"refuses surrounding space", " " + valid[:len(valid)-1], false},
		{"refuses a colon without sha256", ":" + valid[7:] + "000000", false},
		{"refuses non-ASCII digits", valid[:len(valid)-3] + "٣", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidDigest(tc.in); got != tc.want {
				t.Errorf("ValidDigest(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func mustDigest(t *testing.T, doc string) string {
	t.Helper()
	d, err := Digest([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDigestTreeWithoutLeavesOutOnlyTheOutermostMember(t *testing.T) {
	in := []byte(`{"b":1,"signature":"x","a":{"signature":"kept"},"c":[{"signature":2}]}`)
	v, err := Parse(in, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Digest([]byte(`{"a":{"signature":"kept"},"b":1,"c":[{"signature":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the encoders are reused: the same answer every time
		got, err := DigestTreeWithout(v.(map[string]any), "signature")
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		if _, err := DigestTree(map[string]any{"bad": math.NaN()}); !errors.Is(err, ErrNumberRange) {
			t.Fatalf("NaN: %v", err)
		}
	}
	if _, ok := v.(map[string]any)["signature"]; !ok {
		t.Fatal("the tree lost its member")
	}
	only, err := DigestTreeWithout(map[string]any{"signature": "x"}, "signature")
	if err != nil || only != digestOf([]byte("{}")) {
		t.Fatalf("got %q, %v", only, err)
	}
}
