package executor_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sendtwice/sendtwice/internal/executor"
)

func TestABatchMemberCarriesTheBatchHeadersAndTheReceiptKeepsItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header nats.Header
	}{
		{"a receipt with headers keeps exactly them", nats.Header{"Sendtwice-Stream-Seq": {"7"}}},
		{"a receipt without headers keeps none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &nats.Msg{Subject: "receipts.intent-0001", Header: tc.header, Data: []byte(`{"r":1}`)}
			before := len(r.Header)
			m := executor.BatchMember(r, "batch-1", 3)
			if m == r {
				t.Fatal("the batch member is the receipt message itself")
			}
			if m.Header.Get("Nats-Batch-Id") != "batch-1" || m.Header.Get("Nats-Batch-Sequence") != "3" {
				t.Fatalf("batch member headers %v", m.Header)
			}
			if m.Subject != r.Subject || string(m.Data) != string(r.Data) {
				t.Fatalf("batch member %q %q, want the receipt's subject and data", m.Subject, m.Data)
			}
			for k, vs := range r.Header {
				if got := m.Header.Values(k); len(got) != len(vs) || got[0] != vs[0] {
					t.Fatalf("header %s: %v, want %v", k, got, vs)
				}
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			m.Reply = "_INBOX.x"
			if len(r.Header) != before || r.Header.Get("Nats-Batch-Id") != "" || r.Header.Get("Nats-Batch-Commit") != "" || r.Reply != "" {
				t.Fatalf("the receipt message changed: %v, reply %q", r.Header, r.Reply)
			}
		})
	}
}
