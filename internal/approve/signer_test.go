package approve_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/sign"
)

func TestApproveWithANamedKeyRefusesAnotherApproverAndDefaultsToTheKeysName(t *testing.T) {
	dir := t.TempDir()
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.WriteKeyPair(dir, "reviewer-1", k); err != nil {
		t.Fatal(err)
	}
	key, err := sign.LoadKey(filepath.Join(dir, "reviewer-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	cand, req := readSeed(t, "candidate.json"), readSeed(t, "request.json")
	if _, err := approve.Approve(cand, req, approve.Options{By: "mallory", Key: key}); !errors.Is(err, sign.ErrWrongSigner) {
		t.Fatalf("approving as mallory with reviewer-1's key: %v, want sign.ErrWrongSigner", err)
	}
	a, err := approve.Approve(cand, req, approve.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if a.ApprovedBy != "reviewer-1" || a.KeyID != key.ID {
		t.Fatalf("approved_by %q key %s, want reviewer-1 %s", a.ApprovedBy, a.KeyID, key.ID)
	}
	if _, err := approve.Approve(cand, req, approve.Options{By: "reviewer-1", Key: key}); err != nil {
		t.Fatal(err)
	}
}
