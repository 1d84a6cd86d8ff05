package topology_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// oldApprovalMaxMsg is the message size bound APPROVALS had before it was
// bounded to the largest valid envelope: 256 KiB and 16 KiB for headers.
const oldApprovalMaxMsg = 256<<10 + 16<<10

// A deployment provisioned before the bound keeps streams that take a
// message of 272 KiB; the next provisioning bounds them, and records the
// bound it applied.
func TestProvisioningBoundsAnExistingApprovalsStreamToTheLargestValidEnvelope(t *testing.T) {
	js := testenv.JetStream(t)
	ctx := shortContext(t)
	before := topology.ApprovalsConfig(topology.Config{})
	before.MaxMsgSize = oldApprovalMaxMsg
	if _, err := js.CreateStream(ctx, before); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, topology.ApprovalsStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxMsgSize; got != topology.ApprovalMaxMsg {
		t.Errorf("after provisioning, APPROVALS takes messages of %d bytes, want %d", got, topology.ApprovalMaxMsg)
	}
	p, err := topology.ReadRecord(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Streams[topology.ApprovalsStream].MaxMsgSize; got != topology.ApprovalMaxMsg {
		t.Errorf("the record says APPROVALS takes %d bytes, want %d", got, topology.ApprovalMaxMsg)
	}
}
