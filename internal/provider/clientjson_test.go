package provider

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// requestDocuments are request members a create call may carry: the one
// NewRequest makes, JSON that encoding/json compacts or escapes, and
// input that is not JSON.
var requestDocuments = func() []json.RawMessage {
	req, err := NewRequest("intent-1", Task{Title: "<b>Tom & Jerry</b>\u2028"})
	if err != nil {
		panic(err)
	}
	docs := []json.RawMessage{req.Request, nil, {}}
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : [ 1 , -0.5e+3 , true , false , null , "x\"\\\/\b\f\n\r\t\u00e9\uD83D" ] } `,
		"\t\r\n\"<>&\u2028\u2029 \xe2\x80\" ", `[[[{"":{}}]]]`, `0`, `-0`, `1E9`, `12.50`,
		`"bad \xff utf-8"`, strings.Repeat("[", maxCompactDepth+1) + strings.Repeat("]", maxCompactDepth+1),
		// Not JSON.
		`{`, `}`, `[1,]`, `{"a"}`, `{"a":1,}`, `{1:2}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `"\x01"`,
		`"\u12G4"`, `"\q"`, `"open`, `1 2`, `{} x`, `[1 2]`, `{"a":1 "b":2}`, `"\`, `"\u12`,
	} {
		docs = append(docs, json.RawMessage(s))
	}
	return docs
}()

// A create call's body encoded by hand is byte for byte what encoding/json
// writes, over every field, with strings JSON must escape, empty members
// omitted and request documents compacted and escaped; a request member
// encoding/json refuses is refused with its error.
func TestCreateRequestEncodesAsEncodingJSONDoes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 4000 {
		var req CreateRequest
		v := reflect.ValueOf(&req).Elem()
		for i := range v.NumField() {
			if v.Field(i).Type() != reflect.TypeFor[json.RawMessage]() {
				fill(v.Field(i), r)
			}
		}
		req.Request = requestDocuments[r.IntN(len(requestDocuments))]
		want, wantErr := json.Marshal(&req)
		got, err := encodeCreateRequest(&req)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("request %q encoded\n%s (%v)\nencoding/json writes\n%s (%v)", req.Request, got, err, want, wantErr)
		}
	}
}

// The hand encoder takes every request member it can (the whole corpus of
// JSON above but the one nested too deep) and leaves none to encoding/json
// needlessly.
func TestCreateRequestEncodedByHandWhenJSON(t *testing.T) {
	deep := strings.Repeat("[", maxCompactDepth+1)
	for _, doc := range requestDocuments {
		req := CreateRequest{Request: doc}
		_, ok := req.appendJSON(nil)
		if want := json.Valid(doc) || doc == nil; ok != want && !bytes.HasPrefix(doc, []byte(deep)) {
			t.Errorf("request %q: encoded by hand %v, want %v", doc, ok, want)
		}
	}
}

// Any request member is encoded as encoding/json encodes it, or left to
// it: never written when encoding/json refuses it.
func FuzzCreateRequestDocument(f *testing.F) {
	for _, doc := range requestDocuments {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		req := CreateRequest{IntentID: "i", Request: doc}
		want, wantErr := json.Marshal(&req)
		got, ok := req.appendJSON(nil)
		if ok && (wantErr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("request %q encoded\n%s\nencoding/json writes\n%s (%v)", doc, got, want, wantErr)
		}
	})
}

// BenchmarkCreateRequestEncoding encodes a create call's body by hand and
// with encoding/json.
func BenchmarkCreateRequestEncoding(b *testing.B) {
	req := newRequest("bench-intent-0001", "a task title of ordinary length")
	req.CallRef, req.NotAfter = "APPROVALS:123456:1:abcdefghijklmnopqrstuv", "2026-12-05T02:00:00.123456789Z"
	b.Run("by hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeCreateRequest(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A body with nothing to escape is encoded into the one buffer its size
// hint makes: the body's length and the omitted members' frames.
func TestCreateRequestSizeHintHoldsTheBody(t *testing.T) {
	ref, due := "person-1", "2026-12-31"
	for _, req := range []CreateRequest{
		newRequest("intent-1", "a title"),
		{Scope: "team-a", IntentID: "i", RequestDigest: "d", RequestID: "r", Task: Task{Title: "t", AssigneePersonRef: &ref, DueAt: &due},
			Request: json.RawMessage(`{"a":1}`), CallRef: "APPROVALS:1:1:x", NotAfter: "2026-12-05T00:00:00Z"},
		{},
	} {
		body, err := encodeCreateRequest(&req)
		if err != nil {
			t.Fatal(err)
		}
		omitted := 0
		for name, value := range map[string]string{`"scope":"",`: req.Scope, `,"request_id":""`: req.RequestID,
			`,"call_ref":""`: req.CallRef, `,"not_after":""`: req.NotAfter} {
			if value == "" {
				omitted += len(name)
			}
		}
		if hint := req.sizeHint(); hint != len(body)+omitted || cap(body) != hint {
			t.Errorf("size hint %d, body %d bytes in a buffer of %d:\n%s", req.sizeHint(), len(body), cap(body), body)
		}
	}
}
