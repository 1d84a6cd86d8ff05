package canon

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
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
// a large object, a long array and many objects: the large map and the long
// array are not kept, nor are more than maxReusedObjects maps, and every
// kept map and array is empty.
func TestAScratchKeepsOnlySmallObjectsAndBoundedlyMany(t *testing.T) {
	members := make([]string, maxReusedMembers+1)
	for i := range members {
		members[i] = fmt.Sprintf("%q:%d", fmt.Sprint("m", i), i)
	}
	large := "{" + strings.Join(members, ",") + "}"
	long := "[" + strings.Repeat("1,", maxReusedItems) + "1]"
	many := "[" + strings.Repeat(`{"a":[1]},`, 2*maxReusedObjects) + `{"a":[1]}]`
	for _, tc := range []struct {
		name, doc       string
		objects, arrays int
	}{
		{"an object of more than maxReusedMembers members is dropped", `{"small":{"a":[1,2]},"large":` + large + `}`, 2, 1},
		{"an array of more than maxReusedItems items is dropped", `{"short":[1,2],"long":` + long + `}`, 1, 1},
		// The outer array, the first of the slots, is too long to be kept.
		{"no more than maxReusedObjects objects and arrays are kept", many, maxReusedObjects, maxReusedObjects - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Scratch
			if _, err := ParseWith([]byte(tc.doc), DefaultLimits, &s); err != nil {
				t.Fatal(err)
			}
			s.Reset()
			objects, arrays := 0, 0
			for _, m := range s.objects {
				if m == nil {
					continue
				}
				if len(m) != 0 {
					t.Fatalf("a kept object still holds %v", m)
				}
				objects++
			}
			for _, a := range s.arrays {
				if a == nil {
					continue
				}
				if len(a) != 0 || slices.ContainsFunc(a[:cap(a)], func(v any) bool { return v != nil }) {
					t.Fatalf("a kept array still holds %v", a[:cap(a)])
				}
				arrays++
			}
			if objects != tc.objects || arrays != tc.arrays || s.used != 0 || s.usedArrays != 0 {
				t.Fatalf("kept %d maps and %d arrays (used %d, %d), want %d and %d", objects, arrays, s.used, s.usedArrays, tc.objects, tc.arrays)
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
