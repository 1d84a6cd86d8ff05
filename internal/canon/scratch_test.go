package canon

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestAParseWithAScratchReadsWhatParseReads parses documents one after
// another with one Scratch, reset in between, as the gate does: each tree
// must be what Parse makes of the same bytes, whatever the tree before it
// held, and a refusal must be the same refusal.
func TestAParseWithAScratchReadsWhatParseReads(t *testing.T) {
	docs := []string{
		`{"a":{"b":1,"c":[{"d":"x"},{"e":null}]},"f":true}`,
		`{"a":{}}`,
		`{"z":{"y":{"x":{"w":"deep"}}},"v":[{},{"u":1.5}]}`,
		`{"a":1,"a":2}`,
		`{"only":"one"}`,
		`[{"k":1},{"k":2},{"k":3}]`,
		`{"a":{"b":1,"c":[{"d":"x"},{"e":null}]},"f":true}`,
		`{"bad": tru}`,
		"\"a string\"",
	}
	var s Scratch
	for i, doc := range docs {
		want, wantErr := Parse([]byte(doc), DefaultLimits)
		got, err := ParseWith([]byte(doc), DefaultLimits, &s)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("document %d %s: ParseWith = %#v, %v; Parse = %#v, %v", i, doc, got, err, want, wantErr)
		}
		s.Reset()
	}
}

// TestAScratchKeepsOnlySmallObjectsAndBoundedlyMany resets a scratch after
// a large object and after many objects: the large map is not kept, nor
// are more than maxReusedObjects maps, and every kept map is empty.
func TestAScratchKeepsOnlySmallObjectsAndBoundedlyMany(t *testing.T) {
	members := make([]string, maxReusedMembers+1)
	for i := range members {
		members[i] = fmt.Sprintf("%q:%d", fmt.Sprint("m", i), i)
	}
	large := "{" + strings.Join(members, ",") + "}"
	many := "[" + strings.Repeat(`{"a":1},`, 2*maxReusedObjects) + `{"a":1}]`
	for _, tc := range []struct {
		name, doc string
		kept      int
	}{
		{"an object of more than maxReusedMembers members is dropped", `{"small":{"a":1},"large":` + large + `}`, 2},
		{"no more than maxReusedObjects objects are kept", many, maxReusedObjects},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Scratch
			if _, err := ParseWith([]byte(tc.doc), DefaultLimits, &s); err != nil {
				t.Fatal(err)
			}
			s.Reset()
			kept := 0
			for _, m := range s.objects {
				if m == nil {
					continue
				}
				if len(m) != 0 {
					t.Fatalf("a kept object still holds %v", m)
				}
				kept++
			}
			if kept != tc.kept || len(s.objects) > maxReusedObjects || s.used != 0 {
				t.Fatalf("kept %d maps of %d slots (used %d), want %d", kept, len(s.objects), s.used, tc.kept)
			}
		})
	}
}

// FuzzParseWithScratch checks that a parse with a scratch, reset after the
// one before, reads every input as Parse does: the same tree or the same
// refusal.
func FuzzParseWithScratch(f *testing.F) {
	addSeeds(f)
	var s Scratch
	var prev []byte
	f.Fuzz(func(t *testing.T, in []byte) {
		// The tree of the input before fills the scratch first.
		_, _ = ParseWith(prev, DefaultLimits, &s)
		s.Reset()
		prev = append(prev[:0], in...)
		want, wantErr := Parse(in, DefaultLimits)
		got, err := ParseWith(in, DefaultLimits, &s)
		defer s.Reset()
		var ce, wce *Error
		if errors.As(err, &ce) != errors.As(wantErr, &wce) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("ParseWith(%q) refused with %v; Parse with %v", in, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseWith(%q) = %#v; Parse = %#v", in, got, want)
		}
	})
}
