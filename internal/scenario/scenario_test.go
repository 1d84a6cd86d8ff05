package scenario_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite the fixture files under testdata/ at the project root")

const fixtures = "../../testdata"

func TestFixtureFilesAreCurrent(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	files := s.Files()
	signed, err := scenario.SignedFiles()
	if err != nil {
		t.Fatal(err)
	}
	for n, b := range signed {
		files[n] = b
	}
	dest, err := scenario.DestinationFiles()
	if err != nil {
		t.Fatal(err)
	}
	for n, b := range dest {
		files[n] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(fixtures, filepath.FromSlash(n))
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, files[n], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Run(n+" matches what the scenario builds", func(t *testing.T) {
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/scenario -update)", err)
			}
			if !bytes.Equal(got, files[n]) {
				t.Fatalf("%s is out of date (run go test ./internal/scenario -update)", path)
			}
		})
	}
}

func TestEachApprovalCarriesTheDigestsOfItsDocuments(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                         string
		candidate, request, approval string
	}{
		{"original", "seed/candidate.json", "seed/request.json", "seed/approval.json"},
		{"changed", "seed/candidate.json", "seed/request-changed.json", "seed/approval-changed.json"},
		{"new intent", "seed/candidate.json", "seed/request-new-intent.json", "seed/approval-new-intent.json"},
	} {
		t.Run("the "+c.name+" approval names the digests of its fixture files", func(t *testing.T) {
			read := func(n string) []byte {
				b, err := os.ReadFile(filepath.Join(fixtures, n))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			v, err := document.Parse(read(c.approval))
			if err != nil {
				t.Fatal(err)
			}
			a, err := document.DecodeApproval("$", v)
			if err != nil {
				t.Fatal(err)
			}
			cd, _ := canon.Digest(read(c.candidate))
			rd, _ := canon.Digest(read(c.request))
			if a.Candidate.Digest != cd || a.Request.Digest != rd {
				t.Fatalf("approval names %s / %s; files digest to %s / %s", a.Candidate.Digest, a.Request.Digest, cd, rd)
			}
			if _, err := gate.CheckDocumentBindings(read(c.candidate), read(c.request), read(c.approval)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if s.Original.Request == nil {
		t.Fatal("no original request")
	}
}

func TestTheSeedScenarioKeepsUnknownsUnknown(t *testing.T) {
	s, err := scenario.Build()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := document.Parse(s.Original.Request)
	q, err := document.DecodeRequest("$", v)
	if err != nil {
		t.Fatal(err)
	}
	if q.Task.Title != "補上通知設定的檢查項目" || q.Task.AssigneePersonRef != nil || q.Task.DueAt != nil {
		t.Fatalf("task is %+v; want the seed title with a null assignee and due date", q.Task)
	}
	if s.Changed.Request == nil || s.NewIntent.Request == nil {
		t.Fatal("missing scenario requests")
	}
	cv, _ := document.Parse(s.Original.Candidate)
	c, err := document.DecodeCandidate("$", cv)
	if err != nil {
		t.Fatal(err)
	}
	if c.SpeakerRef != nil {
		t.Fatalf("speaker_ref is %q; the seed speaker is anonymous", *c.SpeakerRef)
	}
}
