package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/davtest"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/ledger"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/testenv"
)

// TestCalDAVAnIntentLedgerEntryForgedBeforeTheApprovalRunsIsNamedByVerify
// writes the intent ledger's entry of intent-0001 as the executor role can
// (a plain write of the bucket's key), with a made-up digest and task, before
// the real approval reaches an executor serving Radicale: the approval ends
// idempotency_conflict and no task is created, and verify fails, naming the
// forged entry, its digest and where it was found.
func TestCalDAVAnIntentLedgerEntryForgedBeforeTheApprovalRunsIsNamedByVerify(t *testing.T) {
	s := testenv.SeedFor(t, scenario.CalDAV)
	r := startServedDAVRig(t, davtest.Radicale)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ledger.Ensure(ctx, r.env.JS, 1); err != nil { // as provisioning made it
		t.Fatal(err)
	}
	kv, err := r.env.JS.KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	const forged = "sha256:0000000000000000000000000000000000000000000000000000000000000bad"
	key, err := ledger.Key(document.DefaultScope, "intent-0001")
	if err != nil {
		t.Fatal(err)
	}
	value, err := json.Marshal(map[string]string{"scope": document.DefaultScope, "intent_id": "intent-0001", "request_digest": forged, "task_id": "mallory.ics"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, key, value); err != nil {
		t.Fatalf("forging the entry %s: %v", key, err)
	}

	real := r.send(t, s.Original.Envelope())
	checkServiceReceipt(t, "the real approval after the forgery", real.Receipt, document.OutcomeConflict, "mallory.ics", r.dav.StoreID())
	if n := tasksFor(r.listing(t), "intent-0001"); n != 0 {
		t.Errorf("the collection lists %d tasks of intent-0001, want none: the forged entry stands in for it", n)
	}
	report, err := verifyCalDAV(t, r, r.srv.CollectionURL)
	t.Logf("verify after the forged entry:\n%s", violationLines(report))
	if err == nil {
		t.Fatalf("verify passed with a forged ledger entry:\n%s", report)
	}
	expectLines(t, "verify's report", report,
		"FAIL 15. ledger-entries-approved:",
		"! ledger entry default.intent-0001 (bucket sendtwice-intents, revision ",
		`binds intent "intent-0001" in scope "default" to request digest `+forged+" and task mallory.ics",
		"the approvals of its key carry other request digests (message 1 with sha256:",
		"verify: VIOLATIONS FOUND")
	if strings.Count(report, "FAIL") != 1 {
		t.Errorf("verify failed other checks than ledger-entries-approved:\n%s", violationLines(report))
	}
}
