package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/send"
	"github.com/sendtwice/sendtwice/sendtest"
)

// pipelineAndKey starts the pipeline and writes its reviewer's key file,
// as publisher keygen would, in the test's directory.
func pipelineAndKey(t *testing.T) (p *sendtest.Pipeline, dir, keyFile string) {
	p, dir = sendtest.Start(t), t.TempDir()
	if err := p.Reviewer().Save(dir); err != nil {
		t.Fatal(err)
	}
	return p, dir, filepath.Join(dir, p.Reviewer().Name()+".key")
}

func TestTheProgramSendsItsTaskCreatedThenReplayed(t *testing.T) {
	p, dir, keyFile := pipelineAndKey(t)
	reviewer := p.Reviewer()
	a := sign.ApproverFor(reviewer.Name(), reviewer.PublicKey())
	trusted := filepath.Join(dir, "trusted-approvers.json")
	body := fmt.Sprintf(`{"approvers":[{"name":%q,"key_id":%q,"public_key":%q}]}`, a.Name, a.KeyID, a.PublicKey)
	if err := os.WriteFile(trusted, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var first string
	for _, want := range []send.Outcome{send.Created, send.Replayed} {
		receipt, err := run(context.Background(), p.URL(), keyFile, trusted)
		if err != nil {
			t.Fatal(err)
		}
		if receipt.Outcome != want || receipt.TaskID == "" || (first != "" && receipt.TaskID != first) {
			t.Fatalf("outcome %s task %q, want %s with the first task %q", receipt.Outcome, receipt.TaskID, want, first)
		}
		first = receipt.TaskID
	}
}

func TestTheProgramRefusesAnApprovalByAnUntrustedReviewer(t *testing.T) {
	p, _, keyFile := pipelineAndKey(t)
	_, err := run(context.Background(), p.URL(), keyFile, filepath.Join("..", "..", "testdata", "signed", "trusted-approvers.json"))
	var refusal *send.Refusal
	if !errors.As(err, &refusal) || refusal.Check != "signature" {
		t.Fatalf("err %v, want a refusal at signature", err)
	}
	counts, err := p.Counts(context.Background())
	if err != nil || counts.RequestsReceived != 0 {
		t.Fatalf("counts %+v, %v: want nothing sent", counts, err)
	}
}

// The README shows this program whole; its block must be the file from
// "package main" on, so that what a reader copies is what this test runs.
func TestTheREADMEShowsThisProgramAsItIs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	program := src[bytes.Index(src, []byte("package main")):]
	if !bytes.Contains(readme, append(append([]byte("```go\n"), program...), "```\n"...)) {
		t.Fatal("README.md has no ```go block that is examples/firsttask/main.go from \"package main\" on; copy the file into it")
	}
}
