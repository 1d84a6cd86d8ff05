package document_test

import (
	"encoding/json"
	"testing"

	"github.com/sendtwice/sendtwice/internal/benchcpu"
	"github.com/sendtwice/sendtwice/internal/document"
)

// BenchmarkReceiptEncoding encodes and decodes the common receipt (created,
// no note, not in doubt), as the executor encodes each receipt it stores
// and a publisher decodes each it waits for.
func BenchmarkReceiptEncoding(b *testing.B) {
	data := readFile(b, "receipts/created.json")
	r, err := document.DecodeReceipt(data)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b, "approval")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		for b.Loop() {
			if _, err := document.DecodeReceipt(data); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b, "approval")
	})
}
