package document_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
)

// The JSON Schemas under schemas/ are the documented contract of the
// documents; the executor reads them with the hand-written strict decoder.
// These tests hold the two in agreement: every fixture passes both, and every
// refusal of the decoder that a schema can express is a refusal of the schema
// too. The refusals a schema cannot express are listed separately.

const (
	schemaDir   = "../../schemas"
	testdataDir = "../../testdata"
	schemaBase  = "https://sendtwice.dev/schemas/"
)

// docKind names one of the documents, with its schema and its strict decoder.
type docKind string

const (
	kindCandidate docKind = "candidate"
	kindRequest   docKind = "request"
	kindApproval  docKind = "approval"
	kindEnvelope  docKind = "envelope"
	kindReceipt   docKind = "receipt"
)

var schemaFiles = map[docKind]string{
	kindCandidate: "action-candidate.v1.json",
	kindRequest:   "task-request.v1.json",
	kindApproval:  "task-approval.v1.json",
	kindEnvelope:  "task-envelope.v1.json",
	kindReceipt:   "task-receipt.v1.json",
}

// decoders run the strict decoder on one document's bytes.
var decoders = map[docKind]func([]byte) error{
	kindCandidate: func(data []byte) error {
		v, err := document.Parse(data)
		if err != nil {
			return err
		}
		_, err = document.DecodeCandidate("$", v)
		return err
	},
	kindRequest: func(data []byte) error {
		v, err := document.Parse(data)
		if err != nil {
			return err
		}
		_, err = document.DecodeRequest("$", v)
		return err
	},
	kindApproval: func(data []byte) error {
		v, err := document.Parse(data)
		if err != nil {
			return err
		}
		_, err = document.DecodeApproval("$", v)
		return err
	},
	kindEnvelope: decodeEnvelope,
	kindReceipt: func(data []byte) error {
		_, err := document.DecodeReceipt(data)
		return err
	},
}

// decodeEnvelope splits an envelope and decodes each member, as the gate
// does before it compares digests. A missing approval is not a decoding
// error: the gate refuses it under approval_format.
func decodeEnvelope(data []byte) error {
	parts, err := document.SplitEnvelope(data)
	if err != nil {
		return err
	}
	if _, err := document.DecodeCandidate("$."+document.MemberCandidate, parts.Candidate); err != nil {
		return err
	}
	if _, err := document.DecodeRequest("$."+document.MemberRequest, parts.Request); err != nil {
		return err
	}
	if parts.Approval != nil {
		if _, err := document.DecodeApproval("$."+document.MemberApproval, parts.Approval); err != nil {
			return err
		}
	}
	return nil
}

// offlineLoader refuses every URL: all schemas are added as resources, and
// the tests never fetch anything.
type offlineLoader struct{}

func (offlineLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not one of the schemas under schemas/, and the tests do not fetch", url)
}

// rawSchemas reads the schema files as JSON values.
var rawSchemas = sync.OnceValues(func() (map[docKind]map[string]any, error) {
	out := map[docKind]map[string]any{}
	for k, name := range schemaFiles {
		data, err := os.ReadFile(filepath.Join(schemaDir, name))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a JSON object", name)
		}
		out[k] = m
	}
	return out, nil
})

// compiledSchemas compiles all five schemas with one compiler, so that the
// envelope's $refs resolve to the other three by their $id, with format
// assertion on.
var compiledSchemas = sync.OnceValues(func() (map[docKind]*jsonschema.Schema, error) {
	raw, err := rawSchemas()
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(offlineLoader{})
	for k, doc := range raw {
		id, _ := doc["$id"].(string)
		if id != schemaBase+schemaFiles[k] {
			return nil, fmt.Errorf("%s: $id is %q, want %q", schemaFiles[k], id, schemaBase+schemaFiles[k])
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, err
		}
	}
	out := map[docKind]*jsonschema.Schema{}
	for k := range raw {
		sch, err := c.Compile(schemaBase + schemaFiles[k])
		if err != nil {
			return nil, err
		}
		out[k] = sch
	}
	return out, nil
})

func schemaFor(t *testing.T, k docKind) *jsonschema.Schema {
	t.Helper()
	schemas, err := compiledSchemas()
	if err != nil {
		t.Fatalf("compiling the schemas: %v", err)
	}
	return schemas[k]
}

// validate checks data against the schema of kind k, reading it as a
// generic JSON validator would.
func validate(t *testing.T, k docKind, data []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("reading the instance: %v", err)
	}
	return schemaFor(t, k).Validate(inst)
}

func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures match testdata/%s", pattern)
	}
	var rel []string
	for _, f := range files {
		r, err := filepath.Rel(testdataDir, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	return rel
}

func TestSchemasCompile(t *testing.T) {
	if _, err := compiledSchemas(); err != nil {
		t.Fatalf("compiling the schemas offline: %v", err)
	}
	names, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range schemaFiles {
		want = append(want, n)
	}
	var got []string
	for _, n := range names {
		got = append(got, filepath.Base(n))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("schemas/ holds %v, want exactly %v", got, want)
	}
}

// TestSchemaShape checks the rules every schema follows: draft 2020-12, an
// $id, a title and a description; and in every object schema, a description
// on each member, no members beyond those named, and every member required
// (null is distinct from missing) except the envelope's optional approval and
// the signature members of an approval.
func TestSchemaShape(t *testing.T) {
	raw, err := rawSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for k, doc := range raw {
		name := schemaFiles[k]
		t.Run(name+" follows the schema rules", func(t *testing.T) {
			if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema is %v, want draft 2020-12", doc["$schema"])
			}
			for _, m := range []string{"title", "description"} {
				if s, _ := doc[m].(string); s == "" {
					t.Errorf("no %s", m)
				}
			}
			optional := map[string]bool{}
			if k == kindEnvelope {
				optional["$.approval"] = true
			}
			if k == kindReceipt {
				// Receipts issued before stores had ids lack it.
				optional["$.store_id"] = true
				optional["$.delivery.stored_at"] = true
				// Present where the request was read; only on a replay of a deleted task.
				optional["$.scope"], optional["$.task_deleted"] = true, true
				// Only when the service said more; only on in_doubt.
				optional["$.note"], optional["$.decided_after"] = true, true
				// Only on a traced delivery.
				optional["$.trace_id"] = true
			}
			if k == kindRequest {
				// A request that names no scope lands in the default one,
				// one that names no destination is for the default one.
				optional["$.scope"], optional["$.destination"] = true, true
			}
			if k == kindApproval {
				// A signed approval carries all three; an unsigned one none.
				optional["$.key_id"], optional["$.not_after"], optional["$.signature"] = true, true, true
			}
			checkObjects(t, "$", doc, optional)
		})
	}
}

func checkObjects(t *testing.T, path string, v any, optional map[string]bool) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			if v["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties is %v, want false", path, v["additionalProperties"])
			}
			required := map[string]bool{}
			reqList, _ := v["required"].([]any)
			for _, r := range reqList {
				required[r.(string)] = true
			}
			for name, p := range props {
				mp := path + "." + name
				if pm, _ := p.(map[string]any); pm == nil || pm["description"] == nil {
					t.Errorf("%s: no description", mp)
				}
				if required[name] == optional[mp] {
					t.Errorf("%s: required is %v, want %v", mp, required[name], !optional[mp])
				}
				checkObjects(t, mp, p, optional)
			}
			for r := range required {
				if _, ok := props[r]; !ok {
					t.Errorf("%s: requires %q, which it does not describe", path, r)
				}
			}
		}
		if items, ok := v["items"]; ok {
			checkObjects(t, path+"[]", items, optional)
		}
		if defs, ok := v["$defs"].(map[string]any); ok {
			for name, d := range defs {
				checkObjects(t, path+".$defs."+name, d, optional)
			}
		}
	}
}

// TestSchemaDefsAgree checks that the definitions the schemas share ($defs
// id, text, digest, timestamp, whole-number) are the same in every file.
func TestSchemaDefsAgree(t *testing.T) {
	raw, err := rawSchemas()
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := raw[kindCandidate]["$defs"].(map[string]any)
	if len(ref) == 0 {
		t.Fatal("action-candidate.v1.json has no $defs")
	}
	for k, doc := range raw {
		if k == kindEnvelope {
			continue
		}
		defs, _ := doc["$defs"].(map[string]any)
		if !reflect.DeepEqual(defs, ref) {
			t.Errorf("the $defs of %s differ from those of %s", schemaFiles[k], schemaFiles[kindCandidate])
		}
	}
}

// TestSchemaMembersMatchTypes checks that each schema names exactly the
// members of the Go type, and that a member may be null in the schema
// exactly when the Go field is a pointer.
func TestSchemaMembersMatchTypes(t *testing.T) {
	raw, err := rawSchemas()
	if err != nil {
		t.Fatal(err)
	}
	types := map[docKind]reflect.Type{
		kindCandidate: reflect.TypeFor[document.Candidate](),
		kindRequest:   reflect.TypeFor[document.Request](),
		kindApproval:  reflect.TypeFor[document.Approval](),
		kindEnvelope:  reflect.TypeFor[document.Envelope](),
		kindReceipt:   reflect.TypeFor[document.Receipt](),
	}
	for k, typ := range types {
		t.Run(schemaFiles[k]+" names the members of document."+typ.Name(), func(t *testing.T) {
			compareMembers(t, "$", raw[k], typ)
		})
	}
}

func compareMembers(t *testing.T, path string, sch map[string]any, typ reflect.Type) {
	t.Helper()
	props, _ := sch["properties"].(map[string]any)
	var inSchema, inType []string
	for name := range props {
		inSchema = append(inSchema, name)
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		inType = append(inType, name)
		sub, _ := props[name].(map[string]any)
		if sub == nil {
			continue
		}
		mp := path + "." + name
		ft := f.Type
		// An optional member (omitempty) is a pointer that may be absent, not null.
		optional := strings.Contains(f.Tag.Get("json"), ",omitempty")
		if nullable(sub) != (ft.Kind() == reflect.Pointer && !optional) {
			t.Errorf("%s: nullable in the schema is %v, but the Go field is %s", mp, nullable(sub), ft)
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && sub["properties"] != nil:
			compareMembers(t, mp, sub, ft)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			items, _ := sub["items"].(map[string]any)
			compareMembers(t, mp+"[]", items, ft.Elem())
		}
	}
	slices.Sort(inSchema)
	slices.Sort(inType)
	if !slices.Equal(inSchema, inType) {
		t.Errorf("%s: the schema names %v, the Go type %v", path, inSchema, inType)
	}
}

func nullable(sch map[string]any) bool {
	types, _ := sch["type"].([]any)
	return slices.Contains(types, any("null"))
}

// TestFixtures checks that every fixture passes its schema and the strict
// decoder.
func TestFixtures(t *testing.T) {
	sets := []struct {
		pattern string
		kind    docKind
	}{
		{"seed/candidate.json", kindCandidate},
		{"seed/request*.json", kindRequest},
		{"seed/approval*.json", kindApproval},
		{"seed/envelope*.json", kindEnvelope},
		{"destination/request-*.json", kindRequest},
		{"destination/approval-*.json", kindApproval},
		{"destination/envelope-*.json", kindEnvelope},
		{"receipts/*.json", kindReceipt},
	}
	covered := map[string]bool{}
	for _, set := range sets {
		for _, rel := range glob(t, set.pattern) {
			covered[rel] = true
			t.Run(rel+" passes the "+string(set.kind)+" schema and the strict decoder", func(t *testing.T) {
				data := readFile(t, rel)
				if err := validate(t, set.kind, data); err != nil {
					t.Errorf("schema: %v", err)
				}
				if err := decoders[set.kind](data); err != nil {
					t.Errorf("decoder: %v", err)
				}
			})
		}
	}
	for _, rel := range append(glob(t, "seed/*.json"), glob(t, "destination/*.json")...) {
		if !covered[rel] {
			t.Errorf("%s is not checked: add it to the sets above", rel)
		}
	}
}

// TestReceiptFixtures checks that the example receipts tell the seed
// scenario's story: one create, then a replay of it (2, 1, 1), a conflict
// for a changed request under the same intent id, a refusal at the gate and
// a dead letter.
func TestReceiptFixtures(t *testing.T) {
	read := func(t *testing.T, name string) *document.Receipt {
		t.Helper()
		r, err := document.DecodeReceipt(readFile(t, "receipts/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != name {
			t.Errorf("receipts/%s.json has outcome %q", name, r.Outcome)
		}
		return r
	}
	counts := func(c *document.Counts) string {
		if c == nil {
			return "null"
		}
		return fmt.Sprintf("%d,%d,%d", c.RequestsReceived, c.CreatesExecuted, c.TasksExisting)
	}
	str := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	for _, tc := range []struct {
		name, task, counts, intent, request, approval string
	}{
		{document.OutcomeCreated, "fake-task-0001", "1,1,1", "intent-0001", "task-request-0001", "approval-0001"},
		{document.OutcomeReplayed, "fake-task-0001", "2,1,1", "intent-0001", "task-request-0001", "approval-0001"},
		{document.OutcomeConflict, "fake-task-0001", "3,1,1", "intent-0001", "task-request-0002", "approval-0002"},
		{document.OutcomeRejected, "null", "null", "intent-0001", "task-request-0001", "approval-0001"},
		{document.OutcomeDeadLettered, "null", "null", "intent-0001", "task-request-0001", "approval-0001"},
		{document.OutcomeInDoubt, "null", "null", "intent-0001", "task-request-0001", "approval-0001"},
	} {
		t.Run("the "+tc.name+" receipt names the seed scenario's ids and counters", func(t *testing.T) {
			r := read(t, tc.name)
			got := []string{str(r.TaskID), counts(r.Counts), str(r.IntentID), str(r.RequestID), str(r.ApprovalID)}
			want := []string{tc.task, tc.counts, tc.intent, tc.request, tc.approval}
			if !slices.Equal(got, want) {
				t.Errorf("task, counts, intent, request, approval = %q, want %q", got, want)
			}
			if (r.Rejection != nil) != (tc.name == document.OutcomeRejected) {
				t.Errorf("rejection = %+v", r.Rejection)
			}
			if (r.Failure != nil) != (tc.name == document.OutcomeDeadLettered) {
				t.Errorf("failure = %+v", r.Failure)
			}
		})
	}
	t.Run("the rejected receipt names the request_binding check at $.request", func(t *testing.T) {
		r := read(t, document.OutcomeRejected)
		if r.Rejection.Check != "request_binding" || r.Rejection.Path != "$.request" {
			t.Errorf("rejection = %+v", r.Rejection)
		}
	})
	t.Run("the idempotency_conflict receipt carries the service's reason as its note", func(t *testing.T) {
		if r := read(t, document.OutcomeConflict); r.Note != "the intent ledger holds this key for another request digest" {
			t.Errorf("note = %q", r.Note)
		}
	})
	t.Run("the in_doubt receipt says until when, and only it does", func(t *testing.T) {
		if r := read(t, document.OutcomeInDoubt); r.DecidedAfter != "2026-11-27T10:06:00Z" {
			t.Errorf("decided_after = %q", r.DecidedAfter)
		}
		if r := read(t, document.OutcomeCreated); r.DecidedAfter != "" || r.Note != "" {
			t.Errorf("created: decided_after = %q, note = %q", r.DecidedAfter, r.Note)
		}
	})
	t.Run("the dead_lettered receipt counts five attempts, one per delivery", func(t *testing.T) {
		r := read(t, document.OutcomeDeadLettered)
		if r.Failure.Attempts != 5 || r.Delivery.Delivered != 5 {
			t.Errorf("failure = %+v, delivery = %+v", r.Failure, r.Delivery)
		}
	})
}

// TestTamperedEnvelopes checks the tampered fixtures. They are semantically
// bad, not structurally: their candidate and request members are well formed
// documents, and the envelope schema accepts all of them but one. The
// approval of another kind is refused by the envelope schema (the approval's
// schema_version is a const) and by the decoder; an envelope without an
// approval is well formed (the gate refuses it under approval_format); the
// others differ from what the approval names only in content, so digests,
// which a schema cannot compute, tell them apart at the gate.
func TestTamperedEnvelopes(t *testing.T) {
	acceptedByEnvelopeSchema := map[string]bool{
		"approval-of-another-kind.json":       false,
		"candidate-changed.json":              true,
		"capability-publish-added.json":       true,
		"capability-publish-substituted.json": true,
		"no-approval.json":                    true,
		"request-edited-after-approval.json":  true,
		"source-version-changed.json":         true,
	}
	files := glob(t, "tampered/*.json")
	if len(files) != len(acceptedByEnvelopeSchema) {
		t.Errorf("testdata/tampered holds %d files, the table names %d", len(files), len(acceptedByEnvelopeSchema))
	}
	for _, rel := range files {
		name := filepath.Base(rel)
		accepted, known := acceptedByEnvelopeSchema[name]
		if !known {
			t.Errorf("%s is not in the table; say whether the envelope schema accepts it", rel)
			continue
		}
		data := readFile(t, rel)
		var members map[string]json.RawMessage
		if err := json.Unmarshal(data, &members); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, m := range []struct {
			member string
			kind   docKind
		}{{document.MemberCandidate, kindCandidate}, {document.MemberRequest, kindRequest}} {
			t.Run("the "+m.member+" in "+rel+" passes the "+string(m.kind)+" schema and the strict decoder", func(t *testing.T) {
				if err := validate(t, m.kind, members[m.member]); err != nil {
					t.Errorf("schema: %v", err)
				}
				if err := decoders[m.kind](members[m.member]); err != nil {
					t.Errorf("decoder: %v", err)
				}
			})
		}
		verb := "accept"
		if !accepted {
			verb = "refuse"
		}
		t.Run("the envelope schema and the strict decoder both "+verb+" "+rel, func(t *testing.T) {
			serr := validate(t, kindEnvelope, data)
			derr := decodeEnvelope(data)
			if (serr == nil) != accepted {
				t.Errorf("schema: %v", serr)
			}
			if (derr == nil) != accepted {
				t.Errorf("decoder: %v", derr)
			}
		})
	}
	t.Run("the approval of another kind is refused for its schema_version", func(t *testing.T) {
		err := decodeEnvelope(readFile(t, "tampered/approval-of-another-kind.json"))
		var de *document.Error
		if !errors.Is(err, document.ErrSchemaVersion) || !errors.As(err, &de) || de.Path != "$.approval.schema_version" {
			t.Errorf("decoder: %v", err)
		}
	})
	t.Run("the capability fixtures hold approvals that the approval schema accepts", func(t *testing.T) {
		for _, name := range []string{"capability-publish-added.json", "capability-publish-substituted.json"} {
			var members map[string]json.RawMessage
			if err := json.Unmarshal(readFile(t, "tampered/"+name), &members); err != nil {
				t.Fatal(err)
			}
			if err := validate(t, kindApproval, members[document.MemberApproval]); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}

// mutation changes a document read from a fixture and returns it.
type mutation func(doc any) any

// locate walks a dotted path ("task.title", "evidence.0.start_ms") to the
// container of its last segment.
func locate(doc any, path string) (any, string) {
	segs := strings.Split(path, ".")
	cur := doc
	for _, s := range segs[:len(segs)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil {
				panic(err)
			}
			cur = c[i]
		default:
			panic("no container at " + s + " in " + path)
		}
	}
	return cur, segs[len(segs)-1]
}

func set(path string, v any) mutation {
	return func(doc any) any {
		parent, last := locate(doc, path)
		switch c := parent.(type) {
		case map[string]any:
			c[last] = v
		case []any:
			i, err := strconv.Atoi(last)
			if err != nil {
				panic(err)
			}
			c[i] = v
		}
		return doc
	}
}

func del(path string) mutation {
	return func(doc any) any {
		parent, last := locate(doc, path)
		delete(parent.(map[string]any), last)
		return doc
	}
}

func rename(path, to string) mutation {
	return func(doc any) any {
		parent, last := locate(doc, path)
		m := parent.(map[string]any)
		m[to] = m[last]
		delete(m, last)
		return doc
	}
}

func replace(v any) mutation { return func(any) any { return v } }

// instancePath turns a decoder path ($.evidence[0].start_ms) into the
// segments of a schema validator's instance location.
func instancePath(p string) []string {
	p = strings.TrimPrefix(p, "$")
	var segs []string
	for p != "" {
		switch p[0] {
		case '.':
			p = p[1:]
			i := strings.IndexAny(p, ".[")
			if i < 0 {
				i = len(p)
			}
			segs = append(segs, p[:i])
			p = p[i:]
		case '[':
			i := strings.IndexByte(p, ']')
			segs = append(segs, p[1:i])
			p = p[i+1:]
		default:
			panic("bad path " + p)
		}
	}
	return segs
}

// leafLocations lists where the innermost causes of a schema refusal are.
func leafLocations(err *jsonschema.ValidationError) [][]string {
	if len(err.Causes) == 0 {
		return [][]string{err.InstanceLocation}
	}
	var out [][]string
	for _, c := range err.Causes {
		out = append(out, leafLocations(c)...)
	}
	return out
}

var (
	digestA = "sha256:8ab0a8135ae2223239602e5651807fdaa5ce74c1dccb239174d5e968d10ea970"
	// 2^53 + 2 is the first whole number above 2^53 that a double holds exactly.
	over2p53 = json.Number("9007199254740994")
)

// refusal is a valid fixture with one thing broken that a schema can
// express (see refusals).
type refusal struct {
	name    string
	kind    docKind
	fixture string
	mutate  mutation
	wantErr error
	path    string
}

// refusals are valid fixtures with one thing broken that a schema can
// express. Each must be refused by the strict decoder, with the sentinel and
// at the path given, and by the schema, at that path or at the object holding
// it.
var refusals = []refusal{
	// The candidate.
	{"an unknown member in the candidate is refused by both", kindCandidate, "seed/candidate.json",
		set("confidence", json.Number("0.93")), document.ErrUnknownMember, "$.confidence"},
	{"a case variant of the summary's name (Summary) is refused by both", kindCandidate, "seed/candidate.json",
		rename("summary", "Summary"), document.ErrUnknownMember, "$.Summary"},
	{"a candidate without a candidate_id is refused by both", kindCandidate, "seed/candidate.json",
		del("candidate_id"), document.ErrMissingMember, "$.candidate_id"},
	{"a candidate without speaker_ref (null is not missing) is refused by both", kindCandidate, "seed/candidate.json",
		del("speaker_ref"), document.ErrMissingMember, "$.speaker_ref"},
	{"a candidate without a schema_version is refused by both", kindCandidate, "seed/candidate.json",
		del("schema_version"), document.ErrMissingMember, "$.schema_version"},
	{"a candidate of another version is refused by both", kindCandidate, "seed/candidate.json",
		set("schema_version", "action-candidate.v2"), document.ErrSchemaVersion, "$.schema_version"},
	{"a null summary is refused by both", kindCandidate, "seed/candidate.json",
		set("summary", nil), document.ErrType, "$.summary"},
	{"a summary of white space only is refused by both", kindCandidate, "seed/candidate.json",
		set("summary", " \t\n "), document.ErrValue, "$.summary"},
	{"a summary of an ideographic space only is refused by both", kindCandidate, "seed/candidate.json",
		set("summary", "\u3000"), document.ErrValue, "$.summary"},
	{"a summary of 4097 ASCII bytes is refused by both", kindCandidate, "seed/candidate.json",
		set("summary", strings.Repeat("a", 4097)), document.ErrValue, "$.summary"},
	{"an empty speaker_ref (null or an id, never \"\") is refused by both", kindCandidate, "seed/candidate.json",
		set("speaker_ref", ""), document.ErrValue, "$.speaker_ref"},
	{"a speaker_ref with a space is refused by both", kindCandidate, "seed/candidate.json",
		set("speaker_ref", "person 7"), document.ErrValue, "$.speaker_ref"},
	{"a candidate_id with a space is refused by both", kindCandidate, "seed/candidate.json",
		set("candidate_id", "cand 0001"), document.ErrValue, "$.candidate_id"},
	{"a candidate_id with a DEL character is refused by both", kindCandidate, "seed/candidate.json",
		set("candidate_id", "cand-0001\x7f"), document.ErrValue, "$.candidate_id"},
	{"a candidate_id of 257 ASCII bytes is refused by both", kindCandidate, "seed/candidate.json",
		set("candidate_id", strings.Repeat("c", 257)), document.ErrValue, "$.candidate_id"},
	{"a source version with a tab is refused by both", kindCandidate, "seed/candidate.json",
		set("source.version", "v\t3"), document.ErrValue, "$.source.version"},
	{"an unknown member in the source is refused by both", kindCandidate, "seed/candidate.json",
		set("source.url", "https://example.com/t"), document.ErrUnknownMember, "$.source.url"},
	{"a number for the kind is refused by both", kindCandidate, "seed/candidate.json",
		set("kind", json.Number("1")), document.ErrType, "$.kind"},
	{"an empty evidence array is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence", []any{}), document.ErrValue, "$.evidence"},
	{"17 evidence quotes are refused by both", kindCandidate, "seed/candidate.json",
		set("evidence", slices.Repeat([]any{map[string]any{"quote": "q", "start_ms": 0.0, "end_ms": 1.0}}, 17)), document.ErrValue, "$.evidence"},
	{"an object for the evidence array is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence", map[string]any{}), document.ErrType, "$.evidence"},
	{"a string for an evidence item is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0", "通知設定那邊少了幾個檢查項目"), document.ErrType, "$.evidence[0]"},
	{"an unknown member in an evidence item is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.speaker", "someone"), document.ErrUnknownMember, "$.evidence[0].speaker"},
	{"an evidence item without end_ms is refused by both", kindCandidate, "seed/candidate.json",
		del("evidence.0.end_ms"), document.ErrMissingMember, "$.evidence[0].end_ms"},
	{"an empty quote is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.quote", ""), document.ErrValue, "$.evidence[0].quote"},
	{"a negative start_ms is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.start_ms", json.Number("-1")), document.ErrValue, "$.evidence[0].start_ms"},
	{"a fractional start_ms is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.start_ms", json.Number("812000.5")), document.ErrValue, "$.evidence[0].start_ms"},
	{"a start_ms above 2^53 is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.start_ms", over2p53), document.ErrValue, "$.evidence[0].start_ms"},
	{"a start_ms of 2^53 is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.start_ms", json.Number("9007199254740992")), document.ErrValue, "$.evidence[0].start_ms"},
	{"a string for start_ms is refused by both", kindCandidate, "seed/candidate.json",
		set("evidence.0.start_ms", "812000"), document.ErrType, "$.evidence[0].start_ms"},
	{"an array in place of the candidate is refused by both", kindCandidate, "seed/candidate.json",
		replace([]any{}), document.ErrType, "$"},

	// The task request.
	{"an unknown member in the task is refused by both", kindRequest, "seed/request.json",
		set("task.priority", "high"), document.ErrUnknownMember, "$.task.priority"},
	{"a case variant of the title's name (Title) is refused by both", kindRequest, "seed/request.json",
		rename("task.title", "Title"), document.ErrUnknownMember, "$.task.Title"},
	{"an unknown member in the request is refused by both", kindRequest, "seed/request.json",
		set("approved", true), document.ErrUnknownMember, "$.approved"},
	{"a task without assignee_person_ref (null is not missing) is refused by both", kindRequest, "seed/request.json",
		del("task.assignee_person_ref"), document.ErrMissingMember, "$.task.assignee_person_ref"},
	{"a task without due_at (null is not missing) is refused by both", kindRequest, "seed/request.json",
		del("task.due_at"), document.ErrMissingMember, "$.task.due_at"},
	{"a request without an intent_id is refused by both", kindRequest, "seed/request.json",
		del("intent_id"), document.ErrMissingMember, "$.intent_id"},
	{"a request of another version is refused by both", kindRequest, "seed/request.json",
		set("schema_version", "task-request.v2"), document.ErrSchemaVersion, "$.schema_version"},
	{"a number for the schema_version is refused by both", kindRequest, "seed/request.json",
		set("schema_version", json.Number("1")), document.ErrSchemaVersion, "$.schema_version"},
	{"a null request_id is refused by both", kindRequest, "seed/request.json",
		set("request_id", nil), document.ErrType, "$.request_id"},
	{"a number for the intent_id is refused by both", kindRequest, "seed/request.json",
		set("intent_id", json.Number("1")), document.ErrType, "$.intent_id"},
	{"an intent_id with a space is refused by both", kindRequest, "seed/request.json",
		set("intent_id", "intent 0001"), document.ErrValue, "$.intent_id"},
	{"an operation other than create_task is refused by both", kindRequest, "seed/request.json",
		set("operation", "delete_task"), document.ErrValue, "$.operation"},
	{"an unknown provider is refused by both", kindRequest, "seed/request.json",
		set("provider", "real-task-provider.v1"), document.ErrValue, "$.provider"},
	{"a number for the provider is refused by both", kindRequest, "seed/request.json",
		set("provider", json.Number("1")), document.ErrType, "$.provider"},
	{"an empty destination (leave it out for default) is refused by both", kindRequest, "seed/request.json",
		set("destination", ""), document.ErrValue, "$.destination"},
	{"a destination in upper case is refused by both", kindRequest, "seed/request.json",
		set("destination", "Team"), document.ErrValue, "$.destination"},
	{"a destination starting with a digit is refused by both", kindRequest, "seed/request.json",
		set("destination", "1team"), document.ErrValue, "$.destination"},
	{"a destination of 64 bytes is refused by both", kindRequest, "seed/request.json",
		set("destination", "d"+strings.Repeat("x", 63)), document.ErrValue, "$.destination"},
	{"a destination with a slash is refused by both", kindRequest, "seed/request.json",
		set("destination", "team/tasks"), document.ErrValue, "$.destination"},
	{"a null destination is refused by both", kindRequest, "seed/request.json",
		set("destination", nil), document.ErrType, "$.destination"},
	{"a candidate digest in upper-case hex is refused by both", kindRequest, "seed/request.json",
		set("candidate_ref.candidate_digest", "sha256:"+strings.ToUpper(digestA[7:])), document.ErrValue, "$.candidate_ref.candidate_digest"},
	{"a candidate digest of another algorithm is refused by both", kindRequest, "seed/request.json",
		set("candidate_ref.candidate_digest", "sha512:"+digestA[7:]), document.ErrValue, "$.candidate_ref.candidate_digest"},
	{"a candidate digest one hex digit short is refused by both", kindRequest, "seed/request.json",
		set("candidate_ref.candidate_digest", digestA[:len(digestA)-1]), document.ErrValue, "$.candidate_ref.candidate_digest"},
	{"an unknown member in the candidate_ref is refused by both", kindRequest, "seed/request.json",
		set("candidate_ref.candidate_kind", "commitment"), document.ErrUnknownMember, "$.candidate_ref.candidate_kind"},
	{"an array for the task is refused by both", kindRequest, "seed/request.json",
		set("task", []any{}), document.ErrType, "$.task"},
	{"a null title is refused by both", kindRequest, "seed/request.json",
		set("task.title", nil), document.ErrType, "$.task.title"},
	{"an empty title is refused by both", kindRequest, "seed/request.json",
		set("task.title", ""), document.ErrValue, "$.task.title"},
	{"a title of white space only is refused by both", kindRequest, "seed/request.json",
		set("task.title", "   "), document.ErrValue, "$.task.title"},
	{"a title of 1025 ASCII bytes is refused by both", kindRequest, "seed/request.json",
		set("task.title", strings.Repeat("t", 1025)), document.ErrValue, "$.task.title"},
	{"an empty assignee_person_ref (null or an id, never \"\") is refused by both", kindRequest, "seed/request.json",
		set("task.assignee_person_ref", ""), document.ErrValue, "$.task.assignee_person_ref"},
	{"an assignee_person_ref with a space is refused by both", kindRequest, "seed/request.json",
		set("task.assignee_person_ref", "Mei Lin"), document.ErrValue, "$.task.assignee_person_ref"},
	{"an empty due_at (null or a date-time, never \"\") is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", ""), document.ErrValue, "$.task.due_at"},
	{"a due_at in words is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", "next Friday"), document.ErrValue, "$.task.due_at"},
	{"a due_at with a date and a time but no zone is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", "2026-12-04T18:00:00"), document.ErrValue, "$.task.due_at"},
	{"a due_at of a date without its day is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", "2026-12"), document.ErrValue, "$.task.due_at"},
	{"a due_at of a date in month 13 is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", "2026-13-04"), document.ErrValue, "$.task.due_at"},
	{"a number for due_at is refused by both", kindRequest, "seed/request.json",
		set("task.due_at", json.Number("1796371200")), document.ErrType, "$.task.due_at"},

	// The approval.
	{"an unknown member in the approval is refused by both", kindApproval, "seed/approval.json",
		set("expires_at", "2026-12-27T10:00:00Z"), document.ErrUnknownMember, "$.expires_at"},
	{"a member named like an optional one with its marker (signature?) is refused by both", kindApproval, "seed/approval.json",
		set("signature?", "x"), document.ErrUnknownMember, "$.signature?"},
	{"a case variant of the capabilities' name (Capabilities) is refused by both", kindApproval, "seed/approval.json",
		rename("capabilities", "Capabilities"), document.ErrUnknownMember, "$.Capabilities"},
	{"a document of another kind in place of an approval is refused by both", kindApproval, "seed/approval.json",
		set("schema_version", "task-rejection.v1"), document.ErrSchemaVersion, "$.schema_version"},
	{"an approval without approved_at is refused by both", kindApproval, "seed/approval.json",
		del("approved_at"), document.ErrMissingMember, "$.approved_at"},
	{"an approval_id with a space is refused by both", kindApproval, "seed/approval.json",
		set("approval_id", "approval 0001"), document.ErrValue, "$.approval_id"},
	{"an empty approved_by is refused by both", kindApproval, "seed/approval.json",
		set("approved_by", ""), document.ErrValue, "$.approved_by"},
	{"an approved_by of 257 ASCII bytes is refused by both", kindApproval, "seed/approval.json",
		set("approved_by", strings.Repeat("r", 257)), document.ErrValue, "$.approved_by"},
	{"an approved_at in words is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "yesterday"), document.ErrValue, "$.approved_at"},
	{"an approved_at without an offset is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-11-27T10:00:00"), document.ErrValue, "$.approved_at"},
	{"an approved_at with a space for the T is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-11-27 10:00:00Z"), document.ErrValue, "$.approved_at"},
	{"an approved_at with a lower-case t is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-11-27t10:00:00Z"), document.ErrValue, "$.approved_at"},
	{"an approved_at with a leap second is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-12-31T23:59:60Z"), document.ErrValue, "$.approved_at"},
	{"an approved_at on the 30th of February is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-02-30T10:00:00Z"), document.ErrValue, "$.approved_at"},
	{"an approved_at at hour 24 is refused by both", kindApproval, "seed/approval.json",
		set("approved_at", "2026-11-27T24:00:00Z"), document.ErrValue, "$.approved_at"},
	{"a null candidate digest is refused by both", kindApproval, "seed/approval.json",
		set("candidate.digest", nil), document.ErrType, "$.candidate.digest"},
	{"a candidate digest without its prefix is refused by both", kindApproval, "seed/approval.json",
		set("candidate.digest", digestA[7:]), document.ErrValue, "$.candidate.digest"},
	{"an approved request without a digest is refused by both", kindApproval, "seed/approval.json",
		del("request.digest"), document.ErrMissingMember, "$.request.digest"},
	{"an unknown member in the approved request is refused by both", kindApproval, "seed/approval.json",
		set("request.intent_id", "intent-0001"), document.ErrUnknownMember, "$.request.intent_id"},
	{"a string for the capabilities is refused by both", kindApproval, "seed/approval.json",
		set("capabilities", "create_fake_task"), document.ErrType, "$.capabilities"},
	{"an object for the capabilities is refused by both", kindApproval, "seed/approval.json",
		set("capabilities", map[string]any{"create_fake_task": true}), document.ErrType, "$.capabilities"},
	{"a number as a capability is refused by both", kindApproval, "seed/approval.json",
		set("capabilities", []any{json.Number("1")}), document.ErrType, "$.capabilities[0]"},
	{"an empty capability is refused by both", kindApproval, "seed/approval.json",
		set("capabilities", []any{""}), document.ErrValue, "$.capabilities[0]"},
	{"a capability with spaces is refused by both", kindApproval, "seed/approval.json",
		set("capabilities", []any{"create fake task"}), document.ErrValue, "$.capabilities[0]"},

	// The envelope.
	{"an unknown member in the envelope is refused by both", kindEnvelope, "seed/envelope.json",
		set("note", "resend"), document.ErrUnknownMember, "$.note"},
	{"an envelope without a request is refused by both", kindEnvelope, "seed/envelope.json",
		del("request"), document.ErrMissingMember, "$.request"},
	{"an envelope of another version is refused by both", kindEnvelope, "seed/envelope.json",
		set("schema_version", "task-envelope.v2"), document.ErrSchemaVersion, "$.schema_version"},
	{"a null candidate in the envelope is refused by both", kindEnvelope, "seed/envelope.json",
		set("candidate", nil), document.ErrType, "$.candidate"},
	{"a case variant of the title's name in the envelope's task is refused by both", kindEnvelope, "seed/envelope.json",
		rename("request.task.title", "Title"), document.ErrUnknownMember, "$.request.task.Title"},
	{"an empty evidence array in the envelope's candidate is refused by both", kindEnvelope, "seed/envelope.json",
		set("candidate.evidence", []any{}), document.ErrValue, "$.candidate.evidence"},
	{"an approval of another kind in the envelope is refused by both", kindEnvelope, "seed/envelope.json",
		set("approval.schema_version", "task-rejection.v1"), document.ErrSchemaVersion, "$.approval.schema_version"},
	{"an unknown member in the envelope's approval is refused by both", kindEnvelope, "seed/envelope.json",
		set("approval.comment", "looks fine"), document.ErrUnknownMember, "$.approval.comment"},
	{"a string for the envelope's approval is refused by both", kindEnvelope, "seed/envelope.json",
		set("approval", "approval-0001"), document.ErrType, "$.approval"},

	// The receipt.
	{"a title with a line break is refused by both", kindRequest, "seed/request.json",
		set("task.title", "line one\nline two"), document.ErrValue, "$.task.title"},
	{"a title with a tab is refused by both", kindRequest, "seed/request.json",
		set("task.title", "a\tb"), document.ErrValue, "$.task.title"},
	{"an empty note is refused by both", kindReceipt, "receipts/idempotency_conflict.json",
		set("note", ""), document.ErrValue, "$.note"},
	{"a note of 4097 ASCII bytes is refused by both", kindReceipt, "receipts/idempotency_conflict.json",
		set("note", strings.Repeat("n", 4097)), document.ErrValue, "$.note"},
	{"a number for the note is refused by both", kindReceipt, "receipts/idempotency_conflict.json",
		set("note", json.Number("1")), document.ErrType, "$.note"},
	{"a decided_after that is no time is refused by both", kindReceipt, "receipts/in_doubt.json",
		set("decided_after", "after lunch"), document.ErrValue, "$.decided_after"},
	{"a null decided_after is refused by both", kindReceipt, "receipts/in_doubt.json",
		set("decided_after", nil), document.ErrType, "$.decided_after"},
	{"a receipt intent_id with a space is refused by both", kindReceipt, "receipts/rejected.json",
		set("intent_id", "intent 0001"), document.ErrValue, "$.intent_id"},
	{"an outcome outside the six is refused by both", kindReceipt, "receipts/created.json",
		set("outcome", "succeeded"), document.ErrValue, "$.outcome"},
	{"an outcome in another case (Created) is refused by both", kindReceipt, "receipts/created.json",
		set("outcome", "Created"), document.ErrValue, "$.outcome"},
	{"a case variant of the outcome's name (Outcome) is refused by both", kindReceipt, "receipts/created.json",
		rename("outcome", "Outcome"), document.ErrUnknownMember, "$.Outcome"},
	{"an unknown member in the receipt is refused by both", kindReceipt, "receipts/created.json",
		set("span_id", "00f067aa0ba902b7"), document.ErrUnknownMember, "$.span_id"},
	{"a receipt of another version is refused by both", kindReceipt, "receipts/created.json",
		set("schema_version", "task-receipt.v0"), document.ErrSchemaVersion, "$.schema_version"},
	{"a receipt without a receipt_id is refused by both", kindReceipt, "receipts/created.json",
		del("receipt_id"), document.ErrMissingMember, "$.receipt_id"},
	{"a receipt without rejection (null is not missing) is refused by both", kindReceipt, "receipts/created.json",
		del("rejection"), document.ErrMissingMember, "$.rejection"},
	{"a receipt without intent_id (null is not missing) is refused by both", kindReceipt, "receipts/created.json",
		del("intent_id"), document.ErrMissingMember, "$.intent_id"},
	{"an empty intent_id (null or an id, never \"\") is refused by both", kindReceipt, "receipts/created.json",
		set("intent_id", ""), document.ErrValue, "$.intent_id"},
	{"an intent_id of 1025 ASCII bytes is refused by both", kindReceipt, "receipts/created.json",
		set("intent_id", strings.Repeat("i", 1025)), document.ErrValue, "$.intent_id"},
	{"an empty task_id (null or an id, never \"\") is refused by both", kindReceipt, "receipts/created.json",
		set("task_id", ""), document.ErrValue, "$.task_id"},
	{"a task_id with a space is refused by both", kindReceipt, "receipts/created.json",
		set("task_id", "fake task 0001"), document.ErrValue, "$.task_id"},
	{"a number for the task_id is refused by both", kindReceipt, "receipts/created.json",
		set("task_id", json.Number("1")), document.ErrType, "$.task_id"},
	{"a negative counter is refused by both", kindReceipt, "receipts/created.json",
		set("counts.tasks_existing", json.Number("-1")), document.ErrValue, "$.counts.tasks_existing"},
	{"a fractional counter is refused by both", kindReceipt, "receipts/created.json",
		set("counts.requests_received", json.Number("1.5")), document.ErrValue, "$.counts.requests_received"},
	{"a string for a counter is refused by both", kindReceipt, "receipts/created.json",
		set("counts.creates_executed", "1"), document.ErrType, "$.counts.creates_executed"},
	{"counts without tasks_existing are refused by both", kindReceipt, "receipts/created.json",
		del("counts.tasks_existing"), document.ErrMissingMember, "$.counts.tasks_existing"},
	{"a fourth counter is refused by both", kindReceipt, "receipts/created.json",
		set("counts.tasks_deleted", json.Number("0")), document.ErrUnknownMember, "$.counts.tasks_deleted"},
	{"an array for the counts is refused by both", kindReceipt, "receipts/created.json",
		set("counts", []any{json.Number("1"), json.Number("1"), json.Number("1")}), document.ErrType, "$.counts"},
	{"a null delivery is refused by both", kindReceipt, "receipts/created.json",
		set("delivery", nil), document.ErrType, "$.delivery"},
	{"a delivery without an executor is refused by both", kindReceipt, "receipts/created.json",
		del("delivery.executor"), document.ErrMissingMember, "$.delivery.executor"},
	{"a string for the stream sequence is refused by both", kindReceipt, "receipts/created.json",
		set("delivery.stream_seq", "1"), document.ErrType, "$.delivery.stream_seq"},
	{"a negative delivery count is refused by both", kindReceipt, "receipts/created.json",
		set("delivery.delivered", json.Number("-2")), document.ErrValue, "$.delivery.delivered"},
	{"an executor with a space is refused by both", kindReceipt, "receipts/created.json",
		set("delivery.executor", "exec 1"), document.ErrValue, "$.delivery.executor"},
	{"an issued_at with a space for the T is refused by both", kindReceipt, "receipts/created.json",
		set("issued_at", "2026-11-27 10:05:00Z"), document.ErrValue, "$.issued_at"},
	{"a rejection without a path is refused by both", kindReceipt, "receipts/rejected.json",
		del("rejection.path"), document.ErrMissingMember, "$.rejection.path"},
	{"an unknown member in the rejection is refused by both", kindReceipt, "receipts/rejected.json",
		set("rejection.detail", "x"), document.ErrUnknownMember, "$.rejection.detail"},
	{"a rejection check with a space is refused by both", kindReceipt, "receipts/rejected.json",
		set("rejection.check", "request binding"), document.ErrValue, "$.rejection.check"},
	{"an empty rejection reason is refused by both", kindReceipt, "receipts/rejected.json",
		set("rejection.reason", ""), document.ErrValue, "$.rejection.reason"},
	{"a string for the rejection is refused by both", kindReceipt, "receipts/rejected.json",
		set("rejection", "request_binding"), document.ErrType, "$.rejection"},
	{"a fractional attempt count is refused by both", kindReceipt, "receipts/dead_lettered.json",
		set("failure.attempts", json.Number("4.5")), document.ErrValue, "$.failure.attempts"},
	{"a failure without attempts is refused by both", kindReceipt, "receipts/dead_lettered.json",
		del("failure.attempts"), document.ErrMissingMember, "$.failure.attempts"},
	{"a failure reason of white space only is refused by both", kindReceipt, "receipts/dead_lettered.json",
		set("failure.reason", "\n"), document.ErrValue, "$.failure.reason"},
	{"a store_id with a space is refused by both", kindReceipt, "receipts/created.json",
		set("store_id", "store 3f9c0a7e5b21d864"), document.ErrValue, "$.store_id"},
	{"an empty store_id (null or an id, never \"\") is refused by both", kindReceipt, "receipts/created.json",
		set("store_id", ""), document.ErrValue, "$.store_id"},
	{"a number for the store_id is refused by both", kindReceipt, "receipts/created.json",
		set("store_id", json.Number("7")), document.ErrType, "$.store_id"},
	{"a case variant of the store_id's name is refused by both", kindReceipt, "receipts/created.json",
		set("Store_ID", "store-3f9c0a7e5b21d864"), document.ErrUnknownMember, "$.Store_ID"},
	{"a delivery stored_at that is not a time is refused by both", kindReceipt, "receipts/created.json",
		set("delivery.stored_at", "yesterday"), document.ErrValue, "$.delivery.stored_at"},
	{"a null delivery stored_at (absent or a time, never null) is refused by both", kindReceipt, "receipts/created.json",
		set("delivery.stored_at", nil), document.ErrType, "$.delivery.stored_at"},
	{"a receipt scope in upper case is refused by both", kindReceipt, "receipts/created.json",
		set("scope", "Team-A"), document.ErrValue, "$.scope"},
	{"a receipt scope holding a dot is refused by both", kindReceipt, "receipts/created.json",
		set("scope", "team.a"), document.ErrValue, "$.scope"},
	{"a null receipt scope (absent or a scope, never null) is refused by both", kindReceipt, "receipts/created.json",
		set("scope", nil), document.ErrType, "$.scope"},
	{"a task_deleted of false (absent or true, never false) is refused by both", kindReceipt, "receipts/replayed.json",
		set("task_deleted", false), document.ErrValue, "$.task_deleted"},
	{"a task_deleted that is a string is refused by both", kindReceipt, "receipts/replayed.json",
		set("task_deleted", "true"), document.ErrType, "$.task_deleted"},
}

func mutated(t *testing.T, fixture string, m mutation) []byte {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(readFile(t, fixture)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m(doc))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRefusalsAgree(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) { refusedByBoth(t, tc) })
	}
}

// refusedByBoth checks that the decoder refuses tc's document with its
// sentinel at its path, and the schema at that path or the object holding it.
func refusedByBoth(t *testing.T, tc refusal) {
	t.Helper()
	data := mutated(t, tc.fixture, tc.mutate)

	derr := decoders[tc.kind](data)
	var de *document.Error
	switch {
	case derr == nil:
		t.Errorf("the decoder accepts %s", data)
	case !errors.Is(derr, tc.wantErr) || !errors.As(derr, &de):
		t.Errorf("decoder: %v; want %v", derr, tc.wantErr)
	case de.Path != tc.path:
		t.Errorf("decoder refuses at %s, want %s: %v", de.Path, tc.path, derr)
	}

	serr := validate(t, tc.kind, data)
	var ve *jsonschema.ValidationError
	if serr == nil {
		t.Fatalf("the schema accepts %s", data)
	}
	if !errors.As(serr, &ve) {
		t.Fatalf("schema: %v", serr)
	}
	want := instancePath(tc.path)
	for _, loc := range leafLocations(ve) {
		if len(loc) >= len(want)-1 && len(loc) <= len(want) && slices.Equal(loc, want[:len(loc)]) {
			return
		}
	}
	t.Errorf("the schema refuses, but not at %s or the object holding it: %v", tc.path, serr)
}

// TestValidVariationsAgree checks the other side: documents at the limits,
// or with the nullable members set, pass both.
func TestValidVariationsAgree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    docKind
		fixture string
		mutate  mutation
	}{
		{"a title of exactly 1024 ASCII bytes passes both", kindRequest, "seed/request.json",
			set("task.title", strings.Repeat("t", 1024))},
		{"an assignee and a due date with an offset and a fraction pass both", kindRequest, "seed/request.json",
			func(doc any) any {
				set("task.assignee_person_ref", "person:mei-lin")(doc)
				return set("task.due_at", "2026-12-04T18:00:00.5+08:00")(doc)
			}},
		{"a due_at of a date only (RFC 3339 full-date) passes both", kindRequest, "seed/request.json",
			set("task.due_at", "2026-12-24")},
		{"a request for the CalDAV provider at a named destination passes both", kindRequest, "seed/request.json",
			func(doc any) any {
				set("provider", document.ProviderCalDAV)(doc)
				return set("destination", "team-tasks_2")(doc)
			}},
		{"a request for the Redmine provider passes both", kindRequest, "seed/request.json",
			set("provider", document.ProviderRedmine)},
		{"a destination of exactly 63 bytes passes both", kindRequest, "seed/request.json",
			set("destination", "d"+strings.Repeat("x", 62))},
		{"a candidate_id of exactly 256 ASCII bytes passes both", kindCandidate, "seed/candidate.json",
			set("candidate_id", strings.Repeat("c", 256))},
		{"an id with non-ASCII letters passes both", kindCandidate, "seed/candidate.json",
			set("speaker_ref", "說話者-甲")},
		{"an intent_id in Unicode NFC with non-ASCII letters passes both", kindRequest, "seed/request.json",
			set("intent_id", "caf\u00e9-說話者")},
		{"a summary of exactly 4096 ASCII bytes passes both", kindCandidate, "seed/candidate.json",
			set("summary", strings.Repeat("s", 4096))},
		{"a start_ms and end_ms of 2^53-1 pass both", kindCandidate, "seed/candidate.json",
			func(doc any) any {
				set("evidence.0.start_ms", json.Number("9007199254740991"))(doc)
				return set("evidence.0.end_ms", json.Number("9007199254740991"))(doc)
			}},
		{"an evidence span written as 1.0e3 to 2e3 passes both", kindCandidate, "seed/candidate.json",
			func(doc any) any {
				set("evidence.0.start_ms", json.Number("1.0e3"))(doc)
				return set("evidence.0.end_ms", json.Number("2e3"))(doc)
			}},
		{"an approval with no capabilities passes both (the gate refuses it)", kindApproval, "seed/approval.json",
			set("capabilities", []any{})},
		{"an approved_by with spaces passes both", kindApproval, "seed/approval.json",
			set("approved_by", "Reviewer One (ops)")},
		{"an envelope without an approval passes both (the gate refuses it)", kindEnvelope, "seed/envelope.json",
			del("approval")},
		{"a created receipt naming the store that answered passes both", kindReceipt, "receipts/created.json",
			set("store_id", "store-3f9c0a7e5b21d864")},
		{"a receipt saying when the stream stored its message passes both", kindReceipt, "receipts/created.json",
			set("delivery.stored_at", "2026-11-27T10:04:59.5Z")},
		{"a replayed receipt with a null store_id passes both", kindReceipt, "receipts/replayed.json",
			set("store_id", nil)},
		{"a rejected receipt with a null store_id passes both", kindReceipt, "receipts/rejected.json",
			set("store_id", nil)},
		{"a receipt without a scope (issued before keys had scopes) passes both", kindReceipt, "receipts/created.json",
			del("scope")},
		{"a replayed receipt saying its task was deleted passes both", kindReceipt, "receipts/replayed.json",
			set("task_deleted", true)},
		{"a receipt with every id null passes both", kindReceipt, "receipts/rejected.json",
			func(doc any) any {
				for _, m := range []string{"intent_id", "request_id", "approval_id"} {
					set(m, nil)(doc)
				}
				return doc
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := mutated(t, tc.fixture, tc.mutate)
			if err := decoders[tc.kind](data); err != nil {
				t.Errorf("decoder: %v", err)
			}
			if err := validate(t, tc.kind, data); err != nil {
				t.Errorf("schema: %v", err)
			}
		})
	}
}

// TestRefusalsSchemasCannotExpress documents the gap: the decoder refuses
// these, but a schema sees only the value a JSON parser made of the bytes,
// or cannot compare or measure what is needed, so it accepts them.
func TestRefusalsSchemasCannotExpress(t *testing.T) {
	request := readFile(t, "seed/request.json")
	candidate := readFile(t, "seed/candidate.json")
	const title = `"title": "補上通知設定的檢查項目",`
	if !bytes.Contains(request, []byte(title)) {
		t.Fatalf("seed/request.json no longer holds %s", title)
	}
	withTitle := func(raw string) []byte {
		return bytes.Replace(request, []byte(title), []byte(`"title": `+raw+`,`), 1)
	}
	for _, tc := range []struct {
		name    string
		kind    docKind
		data    []byte
		wantErr error
	}{
		{"a duplicate member name is refused by the decoder; a parser keeps one of the two values",
			kindRequest, withTitle(`"刪除通知設定", "title": "補上通知設定的檢查項目"`), canon.ErrDuplicateName},
		{"data after the document is refused by the decoder; a streaming parser stops before it",
			kindRequest, append(bytes.Clone(request), []byte(`{"schema_version":"task-request.v1"}`)...), canon.ErrTrailingData},
		{"invalid UTF-8 is refused by the decoder; a parser replaces it with U+FFFD",
			kindRequest, withTitle("\"補上\xff檢查項目\""), canon.ErrInvalidUTF8},
		{"a lone surrogate escape is refused by the decoder; a parser replaces it with U+FFFD",
			kindRequest, withTitle(`"補上\ud800檢查項目"`), canon.ErrLoneSurrogate},
		{"a document over 84 KiB is refused by the decoder; a schema does not see the bytes",
			kindRequest, append(bytes.Clone(request), bytes.Repeat([]byte(" "), document.MaxEnvelopeBytes)...), canon.ErrTooLarge},
		{"an intent id too long for a task service's name is refused by the decoder; a schema cannot count its encoding",
			kindRequest, bytes.Replace(request, []byte(`"intent-0001"`), []byte(`"`+strings.Repeat("i", 237)+`"`), 1), document.ErrValue},
		{"a due date before 1970 is refused by the decoder; the pattern sees only digits",
			kindRequest, bytes.Replace(request, []byte(`"due_at": null`), []byte(`"due_at": "1969-12-31"`), 1), document.ErrValue},
		{"a title of 342 characters but 1026 bytes is refused by the decoder; maxLength counts characters",
			kindRequest, withTitle(`"` + strings.Repeat("檢", 342) + `"`), document.ErrValue},
		{"a store_id on a rejected receipt is refused by the decoder; the schema does not tie members to the outcome",
			kindReceipt, mutated(t, "receipts/rejected.json", set("store_id", "store-3f9c0a7e5b21d864")), document.ErrValue},
		{"task_deleted on a created receipt is refused by the decoder; the schema does not tie members to the outcome",
			kindReceipt, mutated(t, "receipts/created.json", set("task_deleted", true)), document.ErrValue},
		{"decided_after on a created receipt is refused by the decoder; the schema does not tie members to the outcome",
			kindReceipt, mutated(t, "receipts/created.json", set("decided_after", "2026-11-27T10:06:00Z")), document.ErrValue},
		{"an in_doubt receipt without decided_after is refused by the decoder; the schema does not tie members to the outcome",
			kindReceipt, mutated(t, "receipts/in_doubt.json", del("decided_after")), document.ErrValue},
		{"an in_doubt receipt naming a task is refused by the decoder; the schema does not tie members to the outcome",
			kindReceipt, mutated(t, "receipts/in_doubt.json", set("task_id", "fake-task-0001")), document.ErrValue},
		{"an end_ms before the start_ms is refused by the decoder; a schema cannot compare two members",
			kindCandidate, bytes.Replace(candidate, []byte(`"end_ms": 816500`), []byte(`"end_ms": 811999`), 1), document.ErrValue},
		{"a due_at of a date that is no day of the calendar is refused by the decoder; the pattern sees only digits",
			kindRequest, mutated(t, "seed/request.json", set("task.due_at", "2026-02-30")), document.ErrValue},
		{"an intent_id not in Unicode NFC (e + U+0301 for é) is refused by the decoder; a schema cannot normalise",
			kindRequest, mutated(t, "seed/request.json", set("intent_id", "cafe\u0301")), document.ErrValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := decoders[tc.kind](tc.data); !errors.Is(err, tc.wantErr) {
				t.Errorf("decoder: %v; want %v", err, tc.wantErr)
			}
			// Read the first value as a streaming JSON parser does.
			dec := json.NewDecoder(bytes.NewReader(tc.data))
			dec.UseNumber()
			var inst any
			if err := dec.Decode(&inst); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if err := schemaFor(t, tc.kind).Validate(inst); err != nil {
				t.Errorf("the schema refuses it after all, so it belongs in the table of refusals: %v", err)
			}
		})
	}
	t.Run("an approval and request that do not match their digests pass both; the gate compares digests", func(t *testing.T) {
		data := readFile(t, "tampered/request-edited-after-approval.json")
		if err := decodeEnvelope(data); err != nil {
			t.Errorf("decoder: %v", err)
		}
		if err := validate(t, kindEnvelope, data); err != nil {
			t.Errorf("schema: %v", err)
		}
	})
}

// TestNullApproval pins down the one place where the envelope schema is
// stricter than SplitEnvelope: a null approval. SplitEnvelope reads it as no
// approval (the gate then refuses the message under approval_format); the
// schema refuses it, since when the member is present it must be an approval.
func TestNullApproval(t *testing.T) {
	data := mutated(t, "seed/envelope.json", set("approval", nil))
	parts, err := document.SplitEnvelope(data)
	if err != nil || parts.Approval != nil {
		t.Errorf("SplitEnvelope: %+v, %v; want no approval and no error", parts, err)
	}
	if err := validate(t, kindEnvelope, data); err == nil {
		t.Error("the envelope schema accepts a null approval")
	}
}
