package executor_test

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/executor"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/provider"
	"github.com/sendtwice/sendtwice/internal/testenv"
	"github.com/sendtwice/sendtwice/internal/topology"
)

// TestTheExecutorSendsTheRequestItsApprovalCovers checks the request bytes
// an executor hands to the task service: the canonical form of the
// envelope's request, which hashes to the approved digest.
func TestTheExecutorSendsTheRequestItsApprovalCovers(t *testing.T) {
	s := testenv.Seed(t)
	v, err := gate.CheckBindings(s.Original.Envelope())
	if err != nil {
		t.Fatal(err)
	}
	req := executor.CallRequest(v, topology.CallRef(1, 1, "a"))
	d, err := canon.DigestExact(req.Request)
	if err != nil || d != req.RequestDigest || d != v.Approval.Request.Digest {
		t.Fatalf("request digests to %s (%v); the call says %s, the approval %s", d, err, req.RequestDigest, v.Approval.Request.Digest)
	}
	call, err := provider.RequestFor(req.Request)
	if err != nil || call.IntentID != req.IntentID || call.RequestID != req.RequestID || call.Task.Title != req.Task.Title {
		t.Fatalf("the service reads %+v (%v) from the request of %+v", call, err, req)
	}
}
