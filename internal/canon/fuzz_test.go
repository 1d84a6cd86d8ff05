package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// addSeeds adds the test tables and the JCS vector inputs to a fuzz corpus.
func addSeeds(f *testing.F) {
	f.Helper()
	for _, r := range refusals {
		if len(r.in) <= 4096 {
			f.Add([]byte(r.in))
		}
	}
	for _, a := range acceptances {
		f.Add([]byte(a.in))
		f.Add([]byte(a.want))
	}
	inputs, err := filepath.Glob(filepath.Join(vectorDir, "input", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzCanonicalize checks that a canonical form is stable and means the same
// as the document it came from.
func FuzzCanonicalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			return
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("Canonicalize(%q) = %q, which is refused: %v", in, out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize is not idempotent:\n in  %q\n out %q\n again %q", in, out, again)
		}
		v1, err1 := Parse(in, DefaultLimits)
		v2, err2 := Parse(out, DefaultLimits)
		if err1 != nil || err2 != nil {
			t.Fatalf("Parse: %v, %v", err1, err2)
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("canonical form means something else:\n in  %q -> %#v\n out %q -> %#v", in, v1, out, v2)
		}
		checkDigestTree(t, in, v1, out)
	})
}

// checkDigestTree checks that the digest of a parsed tree is the digest of
// its canonical form, and that leaving each member of an object out gives
// the digest of the object without it.
func checkDigestTree(t *testing.T, in []byte, v any, canonical []byte) {
	t.Helper()
	d, err := DigestTree(v)
	if err != nil || d != digestOf(canonical) {
		t.Fatalf("DigestTree(%q) = %q, %v; the canonical form's digest is %q", in, d, err, digestOf(canonical))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for _, omit := range append(slices.Collect(maps.Keys(m)), "absent") {
		without := maps.Clone(m)
		delete(without, omit)
		want, err := DigestTree(without)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DigestTreeWithout(m, omit)
		if err != nil || got != want {
			t.Fatalf("DigestTreeWithout(%q, %q) = %q, %v; want %q", in, omit, got, err, want)
		}
		if len(m) != len(without) {
			if _, still := m[omit]; !still {
				t.Fatalf("DigestTreeWithout removed %q from the tree", omit)
			}
		}
	}
}

// FuzzParse checks that Parse never panics, that every refusal is an *Error
// wrapping a sentinel with an offset inside the input, and that Parse agrees
// with encoding/json: what Parse accepts encoding/json reads to the same tree,
// and what encoding/json finds valid Parse refuses only for the reasons
// I-JSON and JCS add.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Parse(in, DefaultLimits)
		if err == nil {
			var std any
			if jerr := json.Unmarshal(in, &std); jerr != nil {
				t.Fatalf("Parse accepted %q, encoding/json refused it: %v", in, jerr)
			}
			if !reflect.DeepEqual(v, std) {
				t.Fatalf("Parse(%q) = %#v, encoding/json read %#v", in, v, std)
			}
		} else if json.Valid(in) {
			switch {
			case errors.Is(err, ErrDuplicateName), errors.Is(err, ErrLoneSurrogate),
				errors.Is(err, ErrInvalidUTF8), errors.Is(err, ErrNumberRange),
				errors.Is(err, ErrTooDeep), errors.Is(err, ErrTooLarge):
			default:
				t.Fatalf("Parse(%q) refused valid JSON: %v", in, err)
			}
		}
		for _, lim := range []Limits{DefaultLimits, {MaxBytes: 64, MaxDepth: 3}} {
			v, err := Parse(in, lim)
			if err == nil {
				if _, err := Encode(v); err != nil {
					t.Fatalf("Encode after Parse(%q): %v", in, err)
				}
				continue
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q): error %T is not a *canon.Error", in, err)
			}
			if e.Err == nil || e.Offset < 0 || e.Offset > len(in) || e.Path == "" {
				t.Fatalf("Parse(%q): malformed error %#v", in, e)
			}
		}
	})
}
