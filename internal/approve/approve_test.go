package approve_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/internal/approve"
	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/gate"
	"github.com/sendtwice/sendtwice/internal/scenario"
	"github.com/sendtwice/sendtwice/internal/sign"
)

const seedDir = "../../testdata/seed"

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(seedDir, name))
	if err != nil {
		t.Fatalf("reading the fixture: %v", err)
	}
	return b
}

func marshal(t *testing.T, a *document.Approval) []byte {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(t *testing.T, doc []byte) string {
	t.Helper()
	d, err := canon.Digest(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestApprovingTheSeedRequestsBindsBothDocuments(t *testing.T) {
	for _, c := range []struct {
		name, request, approval string
		requestID, intentID     string
	}{
		{"the original request", "request.json", "approval.json", "task-request-0001", "intent-0001"},
		{"the changed request", "request-changed.json", "approval-changed.json", "task-request-0002", "intent-0001"},
		{"the request with a new intent", "request-new-intent.json", "approval-new-intent.json", "task-request-0003", "intent-0002"},
	} {
		t.Run(c.name+" gets an approval that passes the gate and binds its candidate and request", func(t *testing.T) {
			cand, req := readSeed(t, "candidate.json"), readSeed(t, c.request)
			a, err := approve.Approve(cand, req, approve.Options{By: "reviewer-7", At: scenario.ApprovedAt})
			if err != nil {
				t.Fatalf("Approve: %v", err)
			}
			doc := marshal(t, a)
			v, err := gate.CheckDocumentBindings(cand, req, doc)
			if err != nil {
				t.Fatalf("the approval does not pass the gate: %v\n%s", err, doc)
			}
			if a.SchemaVersion != document.ApprovalVersion {
				t.Errorf("schema_version %q, want %q", a.SchemaVersion, document.ApprovalVersion)
			}
			want := document.ApprovedCandidate{CandidateID: "cand-0001", Digest: digest(t, cand), SourceVersion: "v3"}
			if a.Candidate != want {
				t.Errorf("candidate binding %+v, want %+v", a.Candidate, want)
			}
			if a.Request != (document.ApprovedRequest{RequestID: c.requestID, Digest: digest(t, req)}) {
				t.Errorf("request binding %+v, want %s with digest %s", a.Request, c.requestID, digest(t, req))
			}
			if v.CandidateDigest != a.Candidate.Digest || v.RequestDigest != a.Request.Digest {
				t.Errorf("the gate recomputed %s / %s; the approval names %s / %s",
					v.CandidateDigest, v.RequestDigest, a.Candidate.Digest, a.Request.Digest)
			}
			if v.Request.IntentID != c.intentID {
				t.Errorf("intent %q, want %q", v.Request.IntentID, c.intentID)
			}
			if len(a.Capabilities) != 1 || a.Capabilities[0] != document.CapabilityCreateFakeTask {
				t.Errorf("capabilities %q, want exactly [%q]", a.Capabilities, document.CapabilityCreateFakeTask)
			}
			if a.ApprovedBy != "reviewer-7" || a.ApprovedAt != "2026-11-27T10:00:00Z" {
				t.Errorf("approved by %q at %q, want reviewer-7 at 2026-11-27T10:00:00Z", a.ApprovedBy, a.ApprovedAt)
			}
			// The approval the fixtures hold binds the same two digests.
			fixture, err := document.Parse(readSeed(t, c.approval))
			if err != nil {
				t.Fatal(err)
			}
			fa, err := document.DecodeApproval("$", fixture)
			if err != nil {
				t.Fatal(err)
			}
			if fa.Candidate != a.Candidate || fa.Request != a.Request {
				t.Errorf("the fixture %s binds %+v %+v; Approve bound %+v %+v", c.approval, fa.Candidate, fa.Request, a.Candidate, a.Request)
			}
		})
	}
}

func TestApprovingTheSeedWithItsFixedFactsReproducesTheFixture(t *testing.T) {
	a, err := approve.Approve(readSeed(t, "candidate.json"), readSeed(t, "request.json"),
		approve.Options{By: scenario.Reviewer, At: scenario.ApprovedAt, ID: "approval-0001"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if want := readSeed(t, "approval.json"); string(got)+"\n" != string(want) {
		t.Fatalf("approval differs from the fixture:\n%s\nwant:\n%s", got, want)
	}
}

func TestApproveRefusesARequestThatPointsAtAnotherCandidate(t *testing.T) {
	cand, req := readSeed(t, "candidate.json"), readSeed(t, "request.json")
	ref := func(member, value string) []byte {
		return scenario.Edit(req, func(m map[string]any) { m["candidate_ref"].(map[string]any)[member] = value })
	}
	otherDigest := "sha256:" + strings.Repeat("0", 64)
	for _, c := range []struct {
		name               string
		candidate, request []byte
		mentions           []string
	}{
		{"a request naming another candidate id", cand, ref("candidate_id", "cand-0002"),
			[]string{`"cand-0002"`, `"cand-0001"`}},
		{"a request naming another source version", cand, ref("source_version", "v2"),
			[]string{`source version "v2"`, `"v3"`}},
		{"a request naming another candidate digest", cand, ref("candidate_digest", otherDigest),
			[]string{otherDigest, digest(t, cand)}},
		{"a candidate whose source version was edited", scenario.Edit(cand, func(m map[string]any) {
			m["source"].(map[string]any)["version"] = "v4"
		}), readSeed(t, "request-changed.json"), []string{`source version "v3"`, `"v4"`}},
		{"a candidate whose summary was edited", scenario.Edit(cand, func(m map[string]any) {
			m["summary"] = "有人說會把通知設定整個重寫"
		}), req, []string{"candidate digest " + digest(t, cand)}},
	} {
		t.Run(c.name+" is refused as a mismatch", func(t *testing.T) {
			a, err := approve.Approve(c.candidate, c.request, approve.Options{By: "reviewer-1"})
			if err == nil {
				t.Fatalf("Approve approved it: %+v", a)
			}
			if !errors.Is(err, approve.ErrMismatch) {
				t.Fatalf("errors.Is(err, ErrMismatch) is false for %v", err)
			}
			if a != nil {
				t.Errorf("an approval came back with the error: %+v", a)
			}
			for _, s := range c.mentions {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not mention %s: %v", s, err)
				}
			}
		})
	}
}

func TestApproveRefusesInputItCannotReadStrictly(t *testing.T) {
	cand, req := readSeed(t, "candidate.json"), readSeed(t, "request.json")
	dupTitle := []byte(strings.Replace(string(req), `"title":`, `"title": "x", "title":`, 1))
	for _, c := range []struct {
		name               string
		candidate, request []byte
		document, path     string
		sentinel           error
	}{
		{"a candidate with a duplicate member", []byte(`{"candidate_id":"a","candidate_id":"b"}`), req,
			"the candidate", "$", canon.ErrDuplicateName},
		{"a candidate with trailing data", append(append([]byte(nil), cand...), "{}"...), req,
			"the candidate", "$", canon.ErrTrailingData},
		{"an empty candidate", nil, req, "the candidate", "$", canon.ErrEmpty},
		{"a request with a duplicate title", cand, dupTitle, "the request", "$.task", canon.ErrDuplicateName},
		{"a request with an unknown member", cand, scenario.Edit(req, func(m map[string]any) {
			m["task"].(map[string]any)["priority"] = "high"
		}), "the request", "$.task.priority", document.ErrUnknownMember},
		{"a request given as the candidate", req, req, "the candidate", "$.", nil},
		{"a candidate given as the request", cand, cand, "the request", "$.", nil},
	} {
		t.Run(c.name+" is refused naming "+c.document+" and the path", func(t *testing.T) {
			a, err := approve.Approve(c.candidate, c.request, approve.Options{By: "reviewer-1"})
			if err == nil {
				t.Fatalf("Approve approved it: %+v", a)
			}
			if errors.Is(err, approve.ErrMismatch) {
				t.Errorf("unreadable input reported as a mismatch: %v", err)
			}
			if !strings.Contains(err.Error(), "reading "+c.document) {
				t.Errorf("the error does not say it was reading %s: %v", c.document, err)
			}
			var de *document.Error
			if !errors.As(err, &de) {
				t.Fatalf("want a *document.Error inside, got %T: %v", err, err)
			}
			if !strings.HasPrefix(de.Path, c.path) || !strings.Contains(err.Error(), de.Path) {
				t.Errorf("path %q, want it to start with %q and to be in the message %q", de.Path, c.path, err)
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Errorf("errors.Is(err, %v) is false for %v", c.sentinel, err)
			}
		})
	}
}

func TestApproveRequiresTheApproversName(t *testing.T) {
	a, err := approve.Approve(readSeed(t, "candidate.json"), readSeed(t, "request.json"), approve.Options{})
	if err == nil {
		t.Fatalf("Approve approved without a name: %+v", a)
	}
	if !strings.Contains(err.Error(), "--by") {
		t.Errorf("the error does not name --by: %v", err)
	}
	if errors.Is(err, approve.ErrMismatch) {
		t.Errorf("a missing name reported as a mismatch: %v", err)
	}
}

func TestApprovalIDsAndTimes(t *testing.T) {
	cand, req := readSeed(t, "candidate.json"), readSeed(t, "request.json")
	at := time.Date(2026, 11, 27, 11, 30, 15, 987654321, time.FixedZone("UTC+8", 8*3600))
	get := func(t *testing.T, opts approve.Options) *document.Approval {
		t.Helper()
		opts.By = "reviewer-1"
		a, err := approve.Approve(cand, req, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gate.CheckDocumentBindings(cand, req, marshal(t, a)); err != nil {
			t.Fatalf("the approval does not pass the gate: %v", err)
		}
		return a
	}

	t.Run("two approvals at different times get different ids when none is given", func(t *testing.T) {
		first, second := get(t, approve.Options{At: at}), get(t, approve.Options{At: at.Add(time.Minute)})
		if first.ApprovalID == second.ApprovalID {
			t.Fatalf("both approvals are %q", first.ApprovalID)
		}
		for _, a := range []*document.Approval{first, second} {
			if !strings.HasPrefix(a.ApprovalID, "approval-") || !document.ValidID(a.ApprovalID) {
				t.Errorf("approval id %q is not a valid approval-… id", a.ApprovalID)
			}
		}
	})
	t.Run("a given id is used as it is", func(t *testing.T) {
		if a := get(t, approve.Options{At: at, ID: "approval-by-hand"}); a.ApprovalID != "approval-by-hand" {
			t.Fatalf("approval id %q, want approval-by-hand", a.ApprovalID)
		}
	})
	t.Run("the approval time is truncated to seconds in UTC", func(t *testing.T) {
		if a := get(t, approve.Options{At: at}); a.ApprovedAt != "2026-11-27T03:30:15Z" {
			t.Fatalf("approved_at %q, want 2026-11-27T03:30:15Z", a.ApprovedAt)
		}
	})
	t.Run("no time given means now, truncated to seconds in UTC", func(t *testing.T) {
		before := time.Now().UTC().Truncate(time.Second)
		a := get(t, approve.Options{})
		after := time.Now().UTC()
		got, err := time.Parse(time.RFC3339Nano, a.ApprovedAt)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(a.ApprovedAt, "Z") || got.Nanosecond() != 0 || got.Before(before) || got.After(after) {
			t.Fatalf("approved_at %q, want a whole second in UTC between %s and %s", a.ApprovedAt, before, after)
		}
	})
}

func TestTheApprovalGrantsTheCapabilityOfTheRequestsProvider(t *testing.T) {
	for _, c := range []struct {
		name string
		f    scenario.For
		want string
	}{
		{"a request for the fake task service is approved for create_fake_task", scenario.Fake, document.CapabilityCreateFakeTask},
		{"a request for a CalDAV calendar is approved for create_caldav_task", scenario.CalDAV.At("team"), document.CapabilityCreateCalDAVTask},
		{"a request for a Redmine project is approved for create_redmine_issue", scenario.Redmine, document.CapabilityCreateRedmineIssue},
	} {
		t.Run(c.name, func(t *testing.T) {
			cand := scenario.Candidate()
			req, err := c.f.Request(cand, "task-request-1", "intent-1", scenario.Title)
			if err != nil {
				t.Fatal(err)
			}
			a, err := approve.Approve(cand, req, approve.Options{By: scenario.Reviewer})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Capabilities, []string{c.want}) {
				t.Errorf("capabilities %q; want [%q]", a.Capabilities, c.want)
			}
		})
	}
}

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
