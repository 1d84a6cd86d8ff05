package approve

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/gate"
)

func seedFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/seed", name))
	if err != nil {
		t.Fatalf("reading the fixture: %v", err)
	}
	return b
}

func TestWriteReturnsIndentedJSONThatPassesTheGatesBindings(t *testing.T) {
	cand, req := seedFile(t, "candidate.json"), seedFile(t, "request.json")
	a, b, err := Write(cand, req, Options{By: "maria"})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || !bytes.Contains(b, []byte("\n  \"approval_id\"")) {
		t.Errorf("want indented JSON ending in a newline, got:\n%s", b)
	}
	var back struct {
		ApprovalID string `json:"approval_id"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.ApprovalID != a.ApprovalID {
		t.Errorf("the bytes hold approval %q (err %v), the document %q", back.ApprovalID, err, a.ApprovalID)
	}
	if _, err := gate.CheckDocumentBindings(cand, req, b); err != nil {
		t.Errorf("the gate refuses what Write returned: %v", err)
	}
}

func TestWriteHandsOutNothingWhenTheSelfCheckRefuses(t *testing.T) {
	cand, req := seedFile(t, "candidate.json"), seedFile(t, "request.json")
	refusal := errors.New("refused on purpose")
	a, b, err := write(cand, req, Options{By: "maria"}, func(_, _, _ []byte) error { return refusal })
	if !errors.Is(err, ErrWouldBeRefused) || !errors.Is(err, refusal) {
		t.Fatalf("want ErrWouldBeRefused wrapping the refusal, got %v", err)
	}
	if a != nil || b != nil {
		t.Errorf("a refused approval was handed out: %v, %q", a, b)
	}
}
