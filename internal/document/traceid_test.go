package document_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
)

// A receipt of a traced delivery names its trace: the decoder and the
// schema take a W3C trace id and agree in refusing anything else.
func TestAReceiptsTraceIDIsAW3CTraceIDOrAbsent(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	t.Run("a receipt with a trace id passes both, and the decoder keeps it", func(t *testing.T) {
		data := mutated(t, "receipts/created.json", set("trace_id", id))
		if err := validate(t, kindReceipt, data); err != nil {
			t.Errorf("schema: %v", err)
		}
		r, err := document.DecodeReceipt(data)
		if err != nil || r.TraceID != id {
			t.Fatalf("decoder: %+v, %v; want trace id %s", r, err, id)
		}
		out, err := json.Marshal(r)
		if err != nil || !strings.Contains(string(out), `"trace_id":"`+id+`"`) {
			t.Errorf("encoded again: %s (%v); want the trace id", out, err)
		}
	})
	t.Run("a receipt without one encodes no trace_id member", func(t *testing.T) {
		r, err := document.DecodeReceipt(readFile(t, "receipts/created.json"))
		if err != nil {
			t.Fatal(err)
		}
		if out, _ := json.Marshal(r); strings.Contains(string(out), "trace_id") {
			t.Errorf("encoded: %s; want no trace_id", out)
		}
	})
	for _, tc := range []refusal{
		{"a trace id in upper case is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", strings.ToUpper(id)), document.ErrValue, "$.trace_id"},
		{"a trace id of 31 digits is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", id[1:]), document.ErrValue, "$.trace_id"},
		{"a trace id of 33 digits is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", id+"0"), document.ErrValue, "$.trace_id"},
		{"a trace id of all zeros (invalid in W3C trace context) is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", strings.Repeat("0", 32)), document.ErrValue, "$.trace_id"},
		{"a traceparent in place of the trace id is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", "00-"+id+"-00f067aa0ba902b7-01"), document.ErrValue, "$.trace_id"},
		{"an empty trace id (absent or a trace id, never \"\") is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", ""), document.ErrValue, "$.trace_id"},
		{"a null trace id is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", nil), document.ErrType, "$.trace_id"},
		{"a number for the trace id is refused by both", kindReceipt, "receipts/created.json",
			set("trace_id", json.Number("4")), document.ErrType, "$.trace_id"},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedByBoth(t, tc) })
	}
}
