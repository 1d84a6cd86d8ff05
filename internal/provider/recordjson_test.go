package provider

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// strangeStrings are what a record's strings may hold that JSON escapes.
var strangeStrings = []string{"", "fake-task-0001", `a "quoted" \ back\slash`, "<b>&amp;</b>",
	"tab\tnew\nline\rret\bbs\fff\x00\x01\x1f\x7f", "naïve ünïcödé 日本 🎉", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82",
	"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}

// fill sets every field of v (a struct, reached through pointers) from r:
// strings from strangeStrings, numbers at random, booleans and nil pointers
// either way. A field added to a record without its encoder is then a
// difference the test sees.
func fill(v reflect.Value, r *rand.Rand) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), r)
		}
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), r)
	case reflect.String:
		v.SetString(strangeStrings[r.IntN(len(strangeStrings))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(r.Int64() >> r.IntN(63))
	case reflect.Uint64:
		v.SetUint(r.Uint64() >> r.IntN(64))
	default:
		panic("fill: no case for " + v.Type().String())
	}
}

// Each record (and the reply) encoded by hand is byte for byte what encoding/json writes,
// over every field, with strings JSON must escape, empty members omitted.
func TestRecordsEncodeAsEncodingJSONDoes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, rec := range []jsonRecord{RequestRecord{}, CreateRecord{}, TaskRecord{}, FirstResult{}, CreateResponse{}} {
		t.Run(reflect.TypeOf(rec).Name(), func(t *testing.T) {
			for range 2000 {
				v := reflect.New(reflect.TypeOf(rec))
				fill(v.Elem(), r)
				want, err := json.Marshal(v.Interface())
				if err != nil {
					t.Fatal(err)
				}
				if got := v.Elem().Interface().(jsonRecord).appendJSON(nil); !bytes.Equal(got, want) {
					t.Fatalf("encoded\n%s\nencoding/json writes\n%s", got, want)
				}
			}
		})
	}
}

// Any string is quoted as encoding/json quotes it.
func FuzzJSONString(f *testing.F) {
	for _, s := range strangeStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q quoted as %s; encoding/json writes %s", s, got, want)
		}
	})
}

// BenchmarkRecordEncoding encodes the four records of a new create, by
// hand and with encoding/json.
func BenchmarkRecordEncoding(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var recs []jsonRecord
	for _, rec := range []jsonRecord{RequestRecord{}, CreateRecord{}, TaskRecord{}, FirstResult{}} {
		v := reflect.New(reflect.TypeOf(rec))
		fill(v.Elem(), r)
		recs = append(recs, v.Elem().Interface().(jsonRecord))
	}
	b.Run("by hand", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			for _, rec := range recs {
				buf = rec.appendJSON(buf[:0])
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			for _, rec := range recs {
				if _, err := json.Marshal(rec); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
