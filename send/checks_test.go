package send_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/taskservice"
)

// The check names are written out in send (so that go doc shows them);
// they must be the gate's, in the gate's order.
func TestTheCheckConstantsAreTheGatesChecksInOrder(t *testing.T) {
	ours := []string{send.CheckEnvelope, send.CheckApprovalFormat, send.CheckSignature, send.CheckExpiry,
		send.CheckCandidateBinding, send.CheckRequestBinding, send.CheckCapability, send.CheckDestination, send.CheckScope}
	if !slices.Equal(ours, gate.Checks) {
		t.Fatalf("send's checks %q, the gate's %q", ours, gate.Checks)
	}
}

// The outcomes a receipt carries are the ones the executors write.
func TestTheOutcomesAreTheReceiptsOwn(t *testing.T) {
	for _, c := range []struct {
		ours   send.Outcome
		theirs string
	}{
		{send.Created, document.OutcomeCreated}, {send.Replayed, document.OutcomeReplayed}, {send.Conflict, document.OutcomeConflict},
		{send.Rejected, document.OutcomeRejected}, {send.DeadLettered, document.OutcomeDeadLettered},
	} {
		if string(c.ours) != c.theirs || !document.Terminal(string(c.ours)) {
			t.Errorf("send's %q, the receipt's %q", c.ours, c.theirs)
		}
	}
	var _ taskservice.Outcome = send.Created // one type
}

// Every error of the package's own functions starts "send: ", matches one
// of its sentinels and carries none of the module's internal types.
func TestErrorsAreThePackagesOwn(t *testing.T) {
	_, buildErr := send.Build(send.Documents{Candidate: []byte("{"), Request: []byte("{}"), Approval: []byte("{}")})
	_, parseErr := send.ParseEnvelope([]byte(`{"not":"an envelope"}`))
	_, receiptErr := send.ParseReceipt([]byte(`{"schema_version":"task-receipt.v1"}`))
	_, refusal := send.Bindings().Documents(send.Documents{Candidate: []byte("{}"), Request: []byte("{}"), Approval: []byte("{}")})
	_, timeErr := send.ParseReceipt([]byte(strings.Replace(string(createdReceipt(t)), `"issued_at": "2026`, `"issued_at": "yesterday 2026`, 1)))
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Build of a document that is not JSON", buildErr, send.ErrInvalid},
		{"ParseEnvelope of what is not an envelope", parseErr, send.ErrNotEnvelope},
		{"ParseEnvelope of what is not an envelope", parseErr, send.ErrInvalid},
		{"ParseReceipt of what is not a receipt", receiptErr, send.ErrBadReceipt},
		{"ParseReceipt of a receipt whose issued_at is no time", timeErr, send.ErrBadReceipt},
		{"a local check's refusal", refusal, send.ErrRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.want) || !strings.HasPrefix(fmt.Sprint(c.err), "send: ") {
				t.Fatalf("%v; want one that starts send: and matches %v", c.err, c.want)
			}
			var de *document.Error
			var ge *gate.Error
			if errors.As(c.err, &de) || errors.As(c.err, &ge) {
				t.Fatalf("%v carries an internal type", c.err)
			}
		})
	}
}

func createdReceipt(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "receipts", "created.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A receipt's times are times.
func TestAReceiptsTimesAreTimes(t *testing.T) {
	r, err := send.ParseReceipt(createdReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.IssuedAt.IsZero() || r.Outcome != send.Created || r.Counts == nil {
		t.Fatalf("receipt %+v", r)
	}
}
